// Draws the job page's telemetry figures and the dashboard's (Plotly JSON from the server) with the plotly.js served
// by Muster. `window.musterDrawFigures` is also what the live page scripts (frontend/job_live.js,
// telemetry/dashboard.js) redraw with.
(function () {
  "use strict";
  if (typeof Plotly === "undefined") { return; }

  function draw(entries) {
    entries.forEach(function (entry) {
      var element = document.getElementById(entry.id);
      if (!element) { return; }
      var layout = entry.figure.layout;
      // A fixed uirevision makes Plotly.react keep what the reader did (zoom, hidden traces) across redraws.
      layout.uirevision = entry.id;
      // The element as tall as the figure: a responsive chart takes its size from its element when the window is
      // resized, and an element as tall as its CSS minimum would squash it to that.
      if (layout.height) { element.style.height = layout.height + "px"; }
      // On a phone the tool bar (zoom, pan, download) lay over the chart's title at the first tap, and a finger
      // zooms with a pinch: the bar is for a wide screen.
      var wide = element.clientWidth >= 600;
      Plotly.react(element, entry.figure.data, layout, { displaylogo: false, responsive: true, displayModeBar: wide ? "hover" : false });
    });
  }

  window.musterDrawFigures = draw;
  var source = document.getElementById("telemetry-figures");
  if (source) { draw(JSON.parse(source.textContent)); }
})();
