// The data manager: "select every image on this page".
(function () {
  "use strict";
  const all = document.getElementById("dm-all");
  if (!all) return;
  all.addEventListener("change", function () {
    document.querySelectorAll("#dm-table input[name=image_ids]").forEach((box) => (box.checked = all.checked));
  });
})();
