(function () {
  var source = document.getElementById("timeline-data");
  var chart = document.getElementById("timeline-chart");
  var select = document.getElementById("timeline-select");
  var search = document.getElementById("timeline-search");
  var count = document.getElementById("timeline-count");
  var empty = document.getElementById("timeline-empty");
  if (!source || !chart || !select || !search) { return; }
  var index = JSON.parse(source.textContent);
  // plotly reads labels as light markup and decodes entities, so text is entity-escaped for it
  function plotlyText(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;")
      .replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function fillOptions(query) {
    var needle = query.trim().toLowerCase();
    while (select.firstChild) { select.removeChild(select.firstChild); }
    var shown = 0;
    index.traces.forEach(function (trace, position) {
      if (needle && trace.id.toLowerCase().indexOf(needle) < 0) { return; }
      var option = document.createElement("option");
      option.value = String(position);
      option.textContent = trace.label;
      select.appendChild(option);
      shown += 1;
    });
    count.textContent = shown + " of " + index.traces.length + " traces match";
    select.disabled = shown === 0;
    if (empty) {
      // a clear "no match" state instead of a stale chart under an empty picker
      empty.hidden = shown !== 0;
      empty.textContent = shown === 0
        ? "No trace id contains \u201c" + query.trim() + "\u201d among the " +
          index.traces.length + " traces this page carries."
        : "";
      chart.style.opacity = shown === 0 ? "0.25" : "";
    }
    return shown;
  }
  function show(position) {
    var trace = index.traces[position];
    var xs = [trace.members[0]];
    var ys = [trace.members[1]];
    index.assignors.forEach(function (name, i) {
      var series = trace.series[i] || [[], [], [], []];
      xs.push(series[0], series[0], series[0]);
      ys.push(series[1], series[2], series[3]);
    });
    var traceNumbers = xs.map(function (_, i) { return i; });
    Plotly.restyle(chart, {x: xs, y: ys}, traceNumbers);
    Plotly.relayout(chart, {"title.text": "Trace " + plotlyText(trace.id)});
    chart.setAttribute("data-trace", trace.id);
  }
  select.addEventListener("change", function () { show(Number(select.value)); });
  search.addEventListener("input", function () {
    if (fillOptions(search.value) > 0) {
      select.selectedIndex = 0;
      show(Number(select.value));
    }
  });
  fillOptions("");
})();
