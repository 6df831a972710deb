// Follows a queued or running what-if run: every few seconds it asks /whatif/<id>/progress/ for the run's status
// and progress, moves the bar, and reloads the page (which then shows the results or the error) once it ends.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("whatif-live").textContent);
  var bar = document.getElementById("whatif-progress");
  var label = document.getElementById("whatif-percent");

  function apply(body) {
    if (body.status !== config.status && !(config.status === "queued" && body.status === "running")) {
      window.location.reload();
      return false;
    }
    config.status = body.status;
    var percent = Math.round(100 * (body.progress || 0));
    if (bar) { bar.value = percent; bar.textContent = percent + "%"; }
    if (label) { label.textContent = percent + "%"; }
    document.body.dataset.liveUpdated = String(Date.now());
    return true;
  }

  window.musterPoll(function () { return config.url; }, config.refresh_ms, apply);
})();
