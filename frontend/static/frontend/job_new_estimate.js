// The submit form's estimate beside Submit: as fields change, the form is posted (debounced, one request at a time)
// to its estimate URL, which answers whether the job would be accepted, which limits hold it and when it would start,
// and the panel is replaced by the server's HTML. Nothing is submitted or reloaded. Also on load once something was
// typed (a cloned, restored or re-shown form), and when the page comes back with the fields the browser restored.
(function () {
  "use strict";
  var form = document.querySelector("form[data-estimate-url]");
  if (!form) { return; }
  var panel = form.querySelector("[data-testid=estimate]");
  var url = form.getAttribute("data-estimate-url");
  var timer = null;
  var busy = false;
  var again = false;

  function ask() {
    timer = null;
    if (busy) { again = true; return; }
    busy = true;
    panel.classList.add("updating");
    fetch(url, { method: "POST", body: new FormData(form), credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.status === 401 || response.redirected) {
          return { html: "<p class=\"muted\">Your session has expired: Submit keeps what you typed through signing in again.</p>" };
        }
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (body) { panel.innerHTML = body.html; })
      .catch(function () { panel.innerHTML = "<p class=\"muted\">No estimate right now.</p>"; })
      .then(function () {
        busy = false;
        panel.classList.remove("updating");
        if (again) { again = false; ask(); }
      });
  }

  function soon() {
    if (timer !== null) { window.clearTimeout(timer); }
    timer = window.setTimeout(ask, 400);
  }

  // A blank form is not told what it lacks before anything was typed; a cloned or restored one gets its estimate at once.
  function started() {
    return ["name", "image", "command"].some(function (name) {
      var field = form.elements.namedItem(name);
      return field && field.value.trim() !== "";
    });
  }

  form.addEventListener("input", soon);
  form.addEventListener("change", soon);
  window.addEventListener("pageshow", function () { if (started()) { soon(); } });
})();
