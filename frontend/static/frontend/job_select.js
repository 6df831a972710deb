// The job list's "Cancel selected" (frontend/job_list.html): the box above the rows ticks every row's box, the
// button says how many are ticked, and the one question before the POST (muster.js asks the form's data-confirm)
// names that number; the answer is the confirmation, so the form says so (`confirmed`) and the server does not ask
// again on a page of its own, as it does for a browser without script. The rows are redrawn in place
// (live_parts.js): poll.js keeps their ticks, and this counts again after each redraw.
(function () {
  "use strict";
  var form = document.getElementById("bulk-cancel");
  if (!form) { return; }
  var all = document.querySelector("input[data-select-all]");
  var button = form.querySelector("[data-bulk-button]");
  var confirmed = document.createElement("input");
  confirmed.type = "hidden";
  confirmed.name = "confirmed";
  confirmed.value = "1";
  form.appendChild(confirmed);

  function boxes() {
    return Array.prototype.filter.call(document.querySelectorAll('input[type="checkbox"][name="job"]'), function (box) {
      return box.form === form;
    });
  }

  function count() {
    var list = boxes();
    var ticked = list.filter(function (box) { return box.checked; }).length;
    if (all) {
      all.checked = list.length > 0 && ticked === list.length;
      all.indeterminate = ticked > 0 && ticked < list.length;
      all.disabled = list.length === 0;
    }
    var jobs = ticked === 1 ? "1 job" : ticked + " jobs";
    // An admin's selection may hold other users' jobs: the question says how many, as their owners will be told.
    var me = form.getAttribute("data-me");
    var theirs = list.filter(function (box) { return box.checked && box.getAttribute("data-owner") !== me; }).length;
    var others = "";
    if (theirs) {
      if (ticked === 1) { others = " It is another user's job."; }
      else if (theirs === ticked) { others = " All are other users' jobs."; }
      else { others = " " + theirs + (theirs === 1 ? " of them is another user's job." : " of them are other users' jobs."); }
    }
    button.disabled = ticked === 0;
    button.textContent = ticked ? "Cancel " + jobs : "Cancel selected";
    form.setAttribute("data-confirm", "Cancel " + jobs + "?" + others + " Their queued or running work stops; this cannot be undone.");
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (all && target === all) {
      boxes().forEach(function (box) { box.checked = all.checked; });
    }
    if (target === all || (target.name === "job" && target.form === form)) { count(); }
  });
  document.addEventListener("muster:parts", count);
  count();
})();
