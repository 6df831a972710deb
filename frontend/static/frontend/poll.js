// One poller for the pages that follow something live (the job list, the cluster page, a job, a what-if run):
// musterPoll(url, refreshMs, apply) asks `url()` for JSON, hands it to apply(body), and asks again
// refreshMs after the answer while apply returns true. The next request is timed from the end of
// the last, so a slow server is never asked twice at once, and a tab in the background asks nothing
// until it is shown again. A redirect (signed out) or an error page: a reload shows the reader what
// happened.
(function () {
  "use strict";
  window.musterPoll = function (url, refreshMs, apply) {
    var timer = null;

    function poll() {
      timer = null;
      fetch(url(), { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok || response.redirected) { throw new Error(url() + ": HTTP " + response.status); }
          return response.json();
        })
        .then(function (body) { if (apply(body)) { schedule(); } })
        .catch(function () { window.location.reload(); });
    }

    function schedule() {
      if (timer === null && !document.hidden) { timer = window.setTimeout(poll, refreshMs); }
    }

    document.addEventListener("visibilitychange", function () {
      if (document.hidden) {
        if (timer !== null) { window.clearTimeout(timer); timer = null; }
      } else {
        schedule();
      }
    });
    schedule();
  };

  // Draws an answer's parts ({element id: HTML}, frontend/live.py) in place, keeping the boxes the reader ticked
  // in them (the job list's rows, by name and value), sets the page's "last updated" stamps ([data-live-stamp]) to
  // body.updated, marks the body with the time (the browser tests watch it) and tells the page ("muster:parts").
  window.musterParts = function (body) {
    var parts = body.parts || {};
    Object.keys(parts).forEach(function (id) {
      var element = document.getElementById(id);
      if (!element) { return; }
      var ticked = {};
      element.querySelectorAll('input[type="checkbox"]:checked').forEach(function (box) {
        ticked[box.name + "=" + box.value] = true;
      });
      element.innerHTML = parts[id];
      element.querySelectorAll('input[type="checkbox"]').forEach(function (box) {
        if (ticked[box.name + "=" + box.value]) { box.checked = true; }
      });
    });
    if (body.updated) {
      document.querySelectorAll("[data-live-stamp]").forEach(function (stamp) { stamp.textContent = body.updated; });
    }
    document.body.dataset.liveUpdated = String(Date.now());
    document.dispatchEvent(new CustomEvent("muster:parts"));
  };
})();
