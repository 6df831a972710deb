// Keeps a job's page current without reloading it while the job is queued, starting or running: every few
// seconds it asks /jobs/<id>/live/ (with the page's own query string, so the chosen run, attempt, range and
// view hold) for the job's state and the parts of the page that change (its status, run time, telemetry
// status and logs: drawn by musterParts, poll.js), and, while it runs, its telemetry figures. When the state
// is no longer the one on the page, or the set of charts changed, it reloads the page, whose sections differ.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("job-live").textContent);

  function chartIds() {
    return Array.prototype.map.call(document.querySelectorAll("#telemetry .chart"), function (el) { return el.id; }).join(",");
  }

  function apply(body) {
    // Another state, or the same state in another attempt (requeued and restarted between two polls).
    if (body.state !== config.state || body.attempt !== config.attempt) { window.location.reload(); return false; }
    var figures = body.figures || [];
    if (figures.map(function (f) { return f.id; }).join(",") !== chartIds()) { window.location.reload(); return false; }
    if (figures.length && window.musterDrawFigures) { window.musterDrawFigures(figures); }
    // While the reader follows the output as it streams (logs_follow.js), the stream is newer than any poll.
    if (document.body.dataset.logsFollowing && body.parts) { delete body.parts["job-logs"]; }
    window.musterParts(body);
    return true;
  }

  window.musterPoll(function () { return config.url + window.location.search; }, config.refresh_ms, apply);
})();
