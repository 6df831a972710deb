// Keeps the job list current without reloading it: while jobs on the page are queued or running, it asks
// the list's own URL with rows=1 every few seconds and swaps in the new rows, so filters, page and scroll
// stay as they are. It stops once nothing on the page can change any more.
(function () {
  "use strict";
  var table = document.querySelector("table.jobs[data-live]");
  if (!table || !window.musterPoll) { return; }
  window.musterPoll(
    function () { return table.dataset.liveUrl; },
    Number(table.dataset.liveMs) || 10000,
    function (body) {
      document.getElementById("job-rows").innerHTML = body.html;
      var stamp = document.getElementById("rows-updated");
      if (stamp) { stamp.textContent = body.updated; }
      document.body.dataset.liveUpdated = String(Date.now());
      return body.live;
    }
  );
})();
