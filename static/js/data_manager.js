// The data manager: "select every image on this page"; excluding needs a reason.
(function () {
  "use strict";
  const all = document.getElementById("dm-all");
  if (all) {
    all.addEventListener("change", function () {
      document.querySelectorAll("#dm-table input[name=image_ids]").forEach((box) => (box.checked = all.checked));
    });
  }
  const action = document.getElementById("dm-action");
  const reason = document.getElementById("dm-reason");
  if (action && reason) {
    // The server refuses an exclusion without a reason too; this says so before the page reloads.
    const sync = function () {
      reason.required = action.value === "exclude";
      reason.placeholder =
        action.value === "exclude" ? "why exclude them? (required)" : "reason (relabel: shown to the labeler)";
    };
    action.addEventListener("change", sync);
    sync();
  }
})();
