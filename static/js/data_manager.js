// The data manager: "select every image on this page"; excluding needs a reason; a bulk action says how many
// images it changes and asks before changing more than a page.
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

  // Say how many images the action will change, and ask before changing more than a page (the server refuses
  // more than a page without their number in "confirm").
  const bulk = document.getElementById("dm-bulk");
  const table = document.getElementById("dm-table");
  if (bulk && table) {
    const scope = document.getElementById("dm-scope");
    const willChange = document.getElementById("dm-will-change");
    const confirmInput = document.getElementById("dm-confirm");
    const above = Number(bulk.dataset.confirmAbove);
    const count = function () {
      if (scope.value === "all") return Number(bulk.dataset.countAll);
      return table.querySelectorAll("input[name=image_ids]:checked").length;
    };
    const show = function () {
      const n = count();
      willChange.textContent = n ? `will change ${n.toLocaleString()} image${n === 1 ? "" : "s"}` : "no image chosen";
    };
    table.addEventListener("change", show);
    show();
    table.addEventListener("submit", function (e) {
      const n = count();
      confirmInput.value = "";
      if (n > above) {
        const what = action.options[action.selectedIndex].text.split(" (")[0];
        if (!window.confirm(`${what}: this changes ${n.toLocaleString()} images, more than a page (${above}). Go ahead?`)) {
          e.preventDefault();
          return;
        }
        confirmInput.value = String(n);
      }
    });
  }
})();
