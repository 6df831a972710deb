// Follows a queued or running what-if run: every few seconds it asks /whatif/<id>/progress/ for the run's status
// and progress, moves the bar, and reloads the page (which then shows the results or the error) once it ends.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("whatif-live").textContent);
  var bar = document.getElementById("whatif-progress");
  var label = document.getElementById("whatif-percent");
  var timer = null;

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

  function poll() {
    timer = null;
    fetch(config.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok || response.redirected) { throw new Error("progress: HTTP " + response.status); }
        return response.json();
      })
      .then(function (body) { if (apply(body)) { schedule(); } })
      .catch(function () { window.location.reload(); });
  }

  // Timed from the end of the last request; a tab in the background asks nothing until it is shown again.
  function schedule() {
    if (timer === null && !document.hidden) { timer = window.setTimeout(poll, config.refresh_ms); }
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) {
      if (timer !== null) { window.clearTimeout(timer); timer = null; }
    } else {
      schedule();
    }
  });
  schedule();
})();
