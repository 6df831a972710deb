// Draws the job page's telemetry figures and the dashboard's (Plotly JSON from the server) with the plotly.js served
// by Muster. `window.musterDrawFigures` is also what the live page scripts (frontend/job_live.js,
// telemetry/dashboard.js) redraw with.
//
// plotly.js (1.4 MB) is fetched only once the page's text is shown: this script's tag names it (data-plotly) and it is
// loaded after DOMContentLoaded and the first paint, so the facts, status and logs read at once and each chart is
// drawn when it comes ("Drawing the chart…" until then, telemetry.css). With plotly.js in a deferred tag of its own, the
// page counted as loaded only after it was fetched, parsed and every chart drawn: 4-5 s in Chromium on a page the
// server answered in 0.1 s. The what-if run's page loads it the same way; a page that loads plotly.js itself first is
// drawn at once.
(function () {
  "use strict";
  var tag = document.currentScript;
  var plotlyUrl = tag ? tag.getAttribute("data-plotly") : null;
  var waiting = [];  // figures asked for before plotly.js came, the latest of each chart
  var loading = false;

  function drawNow(entries) {
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

  function load() {
    if (loading || !plotlyUrl) { return; }
    loading = true;
    var script = document.createElement("script");
    script.src = plotlyUrl;
    script.onload = function () {
      var queued = waiting;
      waiting = [];
      drawNow(queued);
    };
    script.onerror = function () {
      document.querySelectorAll(".chart:empty").forEach(function (element) {
        element.classList.add("chart-failed");
      });
    };
    document.head.appendChild(script);
  }

  function draw(entries) {
    if (typeof Plotly !== "undefined") { drawNow(entries); return; }
    entries.forEach(function (entry) {
      waiting = waiting.filter(function (queued) { return queued.id !== entry.id; });
      waiting.push(entry);
    });
    load();
  }

  window.musterDrawFigures = draw;

  function first() {
    var source = document.getElementById("telemetry-figures");
    if (source) { draw(JSON.parse(source.textContent)); }
  }

  // After the page is shown: the frame after DOMContentLoaded is painted before plotly.js is asked for (a tab
  // opened in the background paints no frame: a moment later, then).
  function afterPaint() {
    var started = false;
    function once() { if (!started) { started = true; first(); } }
    window.requestAnimationFrame(function () { window.setTimeout(once, 0); });
    window.setTimeout(once, 200);
  }

  if (typeof Plotly !== "undefined") {
    first();
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", afterPaint);
  } else {
    afterPaint();
  }
})();
