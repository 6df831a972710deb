// Keeps the parts of a page that change current without reloading it (the job list, the cluster page): while the
// page has an element with data-live (data-live-ms: how often), it asks the page's own URL with parts=1 and swaps
// in the parts the answer names (frontend/live.py), so filters, sort, page, scroll and focus stay as they are.
// It stops once the answer says nothing on the page can change any more.
(function () {
  "use strict";
  var root = document.querySelector("[data-live]");
  if (!root || !window.musterPoll) { return; }

  function url() {
    var query = new URLSearchParams(window.location.search);
    query.set("parts", "1");
    return window.location.pathname + "?" + query.toString();
  }

  window.musterPoll(url, Number(root.dataset.liveMs) || 10000, function (body) {
    window.musterParts(body);
    return body.live;
  });
})();
