// Draws the job page's telemetry figures (Plotly JSON from the server) with the plotly.js served by Muster.
(function () {
  "use strict";
  var source = document.getElementById("telemetry-figures");
  if (!source || typeof Plotly === "undefined") { return; }
  var figures = JSON.parse(source.textContent);
  figures.forEach(function (entry) {
    var element = document.getElementById(entry.id);
    if (element) {
      Plotly.newPlot(element, entry.figure.data, entry.figure.layout, { displaylogo: false, responsive: true });
    }
  });
})();
