// Draws the job page's telemetry figures (Plotly JSON from the server) with the plotly.js served by Muster.
// `window.musterDrawFigures` is also what the live page script (frontend/job_live.js) redraws with.
(function () {
  "use strict";
  if (typeof Plotly === "undefined") { return; }

  function draw(entries) {
    entries.forEach(function (entry) {
      var element = document.getElementById(entry.id);
      if (!element) { return; }
      // A fixed uirevision makes Plotly.react keep what the reader did (zoom, hidden traces) across redraws.
      entry.figure.layout.uirevision = entry.id;
      Plotly.react(element, entry.figure.data, entry.figure.layout, { displaylogo: false, responsive: true });
    });
  }

  window.musterDrawFigures = draw;
  var source = document.getElementById("telemetry-figures");
  if (source) { draw(JSON.parse(source.textContent)); }
})();
