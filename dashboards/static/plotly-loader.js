(function () {
  // Unpacks what dashboards.page.packed() wrote: base64 of gzip, through DecompressionStream.
  function unpack(text) {
    if (typeof DecompressionStream === "undefined") {
      return Promise.reject(new Error(
        "this browser cannot unpack the page (it needs DecompressionStream: Chrome 80, " +
        "Firefox 113, Safari 16.4 or later)"));
    }
    var binary = atob(text.trim());
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i += 1) { bytes[i] = binary.charCodeAt(i); }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }
  function complain(error) {
    var note = document.createElement("p");
    note.className = "empty";
    note.textContent = "The charts could not be drawn: " + error.message;
    document.querySelector("main").insertBefore(note, document.querySelector("main").firstChild);
    throw error;
  }
  window.ktkUnpack = unpack;
  var source = document.getElementById("plotly-js-packed");
  var figureSource = document.getElementById("plotly-figures-packed");
  window.ktkReady = Promise.all([unpack(source.textContent), unpack(figureSource.textContent)])
    .then(function (unpacked) {
      var script = document.createElement("script");
      script.text = unpacked[0];
      document.head.appendChild(script);
      var figures = JSON.parse(unpacked[1]);
      return Promise.all(figures.figures.map(function (entry) {
        return Plotly.newPlot(entry.id, entry.figure.data, entry.figure.layout, figures.config);
      }));
    }).catch(complain);
})();
