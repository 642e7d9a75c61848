(function () {
  // The drill-down: every trace's series travel packed and columnar (aggregation.trace_table);
  // a trace's timeline is cut out of the columns when it is picked.
  var source = document.getElementById("trace-data-packed");
  var chart = document.getElementById("timeline-chart");
  var select = document.getElementById("timeline-select");
  var search = document.getElementById("timeline-search");
  var count = document.getElementById("timeline-count");
  var empty = document.getElementById("timeline-empty");
  if (!source || !chart || !select || !search || !window.ktkReady) { return; }
  var MAX_LISTED = 500;
  var table = null;
  var starts = [];
  var lowered = [];
  // plotly reads labels as light markup and decodes entities, so text is entity-escaped for it
  function plotlyText(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;")
      .replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function rows(position) {
    return [starts[position], starts[position] + table.lengths[position]];
  }
  // seconds since the trace's first generation, or null unless every gap is known
  function elapsed(position) {
    var span = rows(position);
    if (span[1] - span[0] < 2) { return null; }
    var seconds = [0];
    for (var row = span[0] + 1; row < span[1]; row += 1) {
      if (table.interval_ms[row] === null) { return null; }
      seconds.push(seconds[seconds.length - 1] + table.interval_ms[row] / 1000);
    }
    return seconds;
  }
  function label(position) {
    var span = rows(position);
    var movedMost = 0;
    var spreadWorst = 0;
    table.series.forEach(function (series) {
      var moved = 0;
      for (var row = span[0]; row < span[1]; row += 1) {
        moved += series.moved[row] || 0;
        spreadWorst = Math.max(spreadWorst, series.spread[row] || 0);
      }
      movedMost = Math.max(movedMost, moved);
    });
    return table.ids[position] + " \u2014 " + (span[1] - span[0]) + " generations, up to " +
      movedMost.toLocaleString("en-US") + " moved, worst spread " +
      spreadWorst.toLocaleString("en-US");
  }
  function noMatch(query) {
    empty.hidden = false;
    empty.textContent = "No trace id contains \u201c" + query + "\u201d (searched all " +
      table.ids.length.toLocaleString("en-US") + " traces).";
    chart.style.opacity = "0.25";
  }
  function fillOptions(query) {
    var needle = query.trim().toLowerCase();
    while (select.firstChild) { select.removeChild(select.firstChild); }
    var matches = [];
    var total = 0;
    if (!needle) {
      matches = table.worst.slice(0, MAX_LISTED);
      total = table.worst.length;
    } else {
      for (var position = 0; position < lowered.length; position += 1) {
        if (lowered[position].indexOf(needle) < 0) { continue; }
        total += 1;
        if (matches.length < MAX_LISTED) { matches.push(position); }
      }
    }
    matches.forEach(function (position) {
      var option = document.createElement("option");
      option.value = String(position);
      option.textContent = label(position);
      select.appendChild(option);
    });
    if (needle) {
      count.textContent = total.toLocaleString("en-US") + " of " +
        table.ids.length.toLocaleString("en-US") + " traces match" +
        (total > matches.length ? " (the first " + matches.length + " listed)" : "");
    } else {
      count.textContent = "the " + total.toLocaleString("en-US") + " worst of " +
        table.ids.length.toLocaleString("en-US") + " traces";
    }
    select.disabled = matches.length === 0;
    if (needle && total === 0) {
      noMatch(query.trim());
    } else {
      empty.hidden = true;
      empty.textContent = "";
      chart.style.opacity = "";
    }
    return matches.length;
  }
  function show(position) {
    var span = rows(position);
    var seconds = elapsed(position);
    var onTime = seconds !== null;
    var generations = table.generation.slice(span[0], span[1]);
    var xs = onTime ? seconds : generations;
    var allX = [xs];
    var allY = [table.members.slice(span[0], span[1])];
    var custom = [generations];
    table.series.forEach(function (series) {
      ["spread", "moved", "revoked"].forEach(function (name) {
        var values = series[name].slice(span[0], span[1]);
        var present = values.some(function (value) { return value !== null; });
        allX.push(present ? xs : []);
        allY.push(present ? values : []);
        custom.push(present ? generations : []);
      });
    });
    var traceNumbers = allX.map(function (_, i) { return i; });
    Plotly.restyle(chart, {x: allX, y: allY, customdata: custom}, traceNumbers);
    Plotly.relayout(chart, {
      "title.text": "Trace " + plotlyText(table.ids[position]),
      "xaxis4.title.text": onTime
        ? "seconds since the trace's first generation (from its timestamp_ms)"
        : "generation",
    });
    chart.setAttribute("data-trace", table.ids[position]);
    chart.setAttribute("data-axis", onTime ? "time" : "generation");
  }
  // aggregation.delta_encoded: each measure is stored relative to one reference assignor
  function addReferences() {
    Object.keys(table.reference).forEach(function (name) {
      var reference = table.reference[name];
      var base = table.series[reference][name];
      table.series.forEach(function (series, position) {
        if (position === reference) { return; }
        var values = series[name];
        for (var row = 0; row < values.length; row += 1) {
          if (base[row] !== null && values[row] !== null) { values[row] += base[row]; }
        }
      });
    });
  }
  function start(text) {
    table = JSON.parse(text);
    addReferences();
    var row = 0;
    table.lengths.forEach(function (length) { starts.push(row); row += length; });
    lowered = table.ids.map(function (id) { return id.toLowerCase(); });
    select.addEventListener("change", function () { show(Number(select.value)); });
    search.addEventListener("input", function () {
      if (fillOptions(search.value) > 0) {
        select.selectedIndex = 0;
        show(Number(select.value));
      }
    });
    if (fillOptions(search.value) > 0) { show(Number(select.value)); }
    chart.setAttribute("data-ready", "true");
  }
  window.ktkReady.then(function () {
    return window.ktkUnpack(source.textContent);
  }).then(start);
})();
