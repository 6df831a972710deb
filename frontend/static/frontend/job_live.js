// Keeps the page of a running job current without reloading it: every few seconds it asks
// /jobs/<id>/live/ (with the page's own query string, so the chosen run, range and view hold)
// for the job's state, telemetry figures, flags and logs, and redraws them in place. When the
// state is no longer the one on the page, or the set of charts changed, it reloads the page.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("job-live").textContent);

  function chartIds() {
    return Array.prototype.map.call(document.querySelectorAll("#telemetry .chart"), function (el) { return el.id; }).join(",");
  }

  function replace(id, html) {
    var element = document.getElementById(id);
    if (element && typeof html === "string") { element.innerHTML = html; }
  }

  function apply(body) {
    // Another state, or the same state in another attempt (requeued and restarted between two polls).
    if (body.state !== config.state || body.attempt !== config.attempt) { window.location.reload(); return false; }
    var figures = body.figures || [];
    if (figures.map(function (f) { return f.id; }).join(",") !== chartIds()) { window.location.reload(); return false; }
    if (figures.length && window.musterDrawFigures) { window.musterDrawFigures(figures); }
    replace("telemetry-status", body.telemetry_status_html);
    // While the reader follows the output as it streams (logs_follow.js), the stream is newer than any poll.
    if (!document.body.dataset.logsFollowing) { replace("job-logs", body.logs_html); }
    document.body.dataset.liveUpdated = String(Date.now());
    return true;
  }

  window.musterPoll(function () { return config.url + window.location.search; }, config.refresh_ms, apply);
})();
