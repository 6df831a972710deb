// Small behaviours of the pages, kept out of the HTML so the Content-Security-Policy can forbid inline script:
// a <select data-autosubmit> submits its form when changed; a <form data-confirm="..."> asks before it submits
// (quoting its field with data-confirm-quote, when filled, and the words of each ticked data-confirm-checked box).
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
    // A box with data-confirm-checked adds its words when ticked (the job page's Requeue: "and hold it").
    form.querySelectorAll("input[data-confirm-checked]:checked").forEach(function (box) {
      question += "\n" + box.getAttribute("data-confirm-checked");
    });
    if (!window.confirm(question)) { event.preventDefault(); }
  });
})();
