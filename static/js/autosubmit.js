// Fields marked data-autosubmit submit their form when changed (no inline handlers: the
// Content-Security-Policy allows no inline script).
document.querySelectorAll("[data-autosubmit]").forEach((field) => {
  field.addEventListener("change", () => field.form && field.form.submit());
});
