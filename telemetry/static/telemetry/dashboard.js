// Keeps the dashboard current without reloading it: every MUSTER_DASHBOARD_REFRESH_SECONDS it asks the page's own
// URL (window and all) with live=1 for the figures and the page's body, swaps the new body in around the charts
// already drawn, and redraws those with Plotly.react (telemetry/charts.js), which keeps the reader's zoom and
// hidden series. A chart that appears or goes away comes with the new body; the first chart on a page that had
// none needs plotly.js, which a reload brings.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("dashboard-live").textContent);
  if (!window.musterPoll) { return; }

  function url() {
    var params = new URLSearchParams(window.location.search);
    params.set("live", "1");
    return window.location.pathname + "?" + params.toString();
  }

  function apply(body) {
    var figures = body.figures || [];
    if (figures.length && !window.musterDrawFigures) { window.location.reload(); return false; }
    var current = document.getElementById("dashboard-body");
    var fresh = new DOMParser().parseFromString(body.html, "text/html").body;
    // Every chart still on the page keeps its element (where Plotly keeps the zoom): it moves into the new body.
    Array.prototype.forEach.call(fresh.querySelectorAll(".chart[id]"), function (placeholder) {
      var kept = document.getElementById(placeholder.id);
      if (kept) { placeholder.parentNode.replaceChild(kept, placeholder); }
    });
    current.replaceChildren.apply(current, Array.prototype.slice.call(fresh.childNodes));
    if (figures.length) { window.musterDrawFigures(figures); }
    document.body.dataset.liveUpdated = String(Date.now());
    return true;
  }

  window.musterPoll(url, config.refresh_ms, apply);
})();
