// Buttons that send a request are disabled while it runs: a double click uploaded, imported, corrected or
// decided twice (issue 23). Scripts that send with fetch wrap the request in ``fairtoneBusy(form, work)``;
// a plain form (a page load follows) has its buttons disabled once the browser has taken the submit.
(function () {
  "use strict";
  function buttons(form) {
    return Array.from(form.querySelectorAll("button, input[type=submit]")).filter((b) => !b.disabled);
  }
  window.fairtoneBusy = async function (form, work) {
    if (form.getAttribute("aria-busy") === "true") return null; // one request at a time per form
    const held = buttons(form);
    held.forEach((b) => (b.disabled = true));
    form.setAttribute("aria-busy", "true");
    try {
      return await work();
    } finally {
      held.forEach((b) => (b.disabled = false));
      form.removeAttribute("aria-busy");
    }
  };
  document.addEventListener("submit", function (e) {
    const form = e.target;
    if (e.defaultPrevented || (form.getAttribute("method") || "get").toLowerCase() !== "post") return;
    // After this event: a button disabled now would leave its name and value out of what is sent. If no new
    // page comes (an answer that is a download), they work again after a while.
    setTimeout(function () {
      const held = buttons(form);
      held.forEach(function (b) {
        b.disabled = true;
        b.dataset.busy = "1";
      });
      setTimeout(function () {
        held.forEach(function (b) {
          b.disabled = false;
          delete b.dataset.busy;
        });
      }, 15000);
    }, 0);
  });
  // Back to a page kept in the browser's cache: its buttons work again.
  window.addEventListener("pageshow", function (e) {
    if (!e.persisted) return;
    document.querySelectorAll("[data-busy]").forEach(function (b) {
      b.disabled = false;
      delete b.dataset.busy;
    });
  });
})();
