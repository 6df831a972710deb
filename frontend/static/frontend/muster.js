// Small behaviours of the pages, kept out of the HTML so the Content-Security-Policy can forbid inline script:
// a <select data-autosubmit> submits its form when changed; a <form data-confirm="..."> asks before it submits.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.matches && target.matches("select[data-autosubmit]") && target.form) { target.form.submit(); }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { event.preventDefault(); }
  });
})();
