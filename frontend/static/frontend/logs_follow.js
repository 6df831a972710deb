// "Follow the output": streams a running rank's output into the page as it is written, from
// /api/v1/jobs/<id>/logs/?follow=true (text/plain, one long response), instead of the last lines the
// page's poll shows every few seconds (and leaves alone from then on). The stream ends when the attempt
// does; the poll then sees the new state and reloads the page, which shows the output as it was kept.
(function () {
  "use strict";
  var KEEP_CHARS = 1000000; // the page keeps the end of a long output, as the kept log does

  function follow(button) {
    var pre = document.querySelector("#job-logs pre.logs");
    if (!pre || !window.fetch || !window.TextDecoder) { return; }
    document.body.dataset.logsFollowing = "true";
    button.disabled = true;
    button.textContent = "Following the output as it is written…";
    var decoder = new TextDecoder();
    var text = "";
    fetch(button.dataset.follow, { credentials: "same-origin", headers: { Accept: "text/plain, */*" } })
      .then(function (response) {
        if (!response.ok || !response.body) { throw new Error("HTTP " + response.status); }
        var reader = response.body.getReader();
        function read() {
          return reader.read().then(function (chunk) {
            if (chunk.done) { return; }
            text = (text + decoder.decode(chunk.value, { stream: true })).slice(-KEEP_CHARS);
            var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
            pre.textContent = text;
            if (atBottom) { pre.scrollTop = pre.scrollHeight; }
            return read();
          });
        }
        return read();
      })
      .then(function () {
        // The whole output is on the page; it stays until the page reloads for the job's new state.
        document.body.dataset.logsFollowing = "ended";
        button.textContent = "The attempt has ended: its output is kept.";
      })
      .catch(function () {
        delete document.body.dataset.logsFollowing; // the page's poll shows the last lines again
        button.textContent = "The stream stopped; the page goes on updating every few seconds.";
      });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-follow]") : null;
    if (button) { follow(button); }
  });
})();
