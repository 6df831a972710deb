// Small behaviours of the pages, kept out of the HTML so the Content-Security-Policy can forbid inline script:
// a <select data-autosubmit> submits its form when changed; a <form data-confirm="..."> asks before it submits
// (quoting its field with data-confirm-quote, when filled).
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.matches && target.matches("select[data-autosubmit]") && target.form) { target.form.submit(); }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (!question) { return; }
    // A field with data-confirm-quote is quoted in the question when filled (the reason an admin's cancel gives its
    // owner), so what is about to be sent is what is confirmed.
    var quoted = form.querySelector("[data-confirm-quote]");
    if (quoted && quoted.value.trim()) { question += "\n" + quoted.getAttribute("data-confirm-quote") + quoted.value.trim(); }
    if (!window.confirm(question)) { event.preventDefault(); }
  });
})();
