// Post-calibration review: corrections and relabel requests through the API.
(function () {
  "use strict";
  const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
  async function post(url, body, statusEl) {
    statusEl.textContent = "saving…";
    statusEl.className = "small status";
    try {
      const r = await fetch(url, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": token, Accept: "application/json" },
        body: JSON.stringify(body),
      });
      const data = await r.json().catch(() => ({}));
      if (!r.ok) throw new Error(data.detail || Object.entries(data).map(([k, v]) => `${k}: ${[].concat(v).join(" ")}`).join("; "));
      statusEl.textContent = "saved";
      return data;
    } catch (e) {
      statusEl.textContent = e.message || "failed";
      statusEl.className = "small status error";
      return null;
    }
  }
  document.querySelectorAll("form.correction").forEach(function (form) {
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      post(`/api/labels/${form.dataset.label}/corrections/`, {
        tones: [parseInt(form.tones.value, 10)], reason: form.reason.value,
      }, form.querySelector(".status")).then(function (revision) {
        if (!revision) return;
        const row = form.closest("tr");
        row.querySelector(".selection").textContent = String(revision.tone_low) + " (corrected)";
        row.querySelector(".value").textContent = revision.value.toFixed(1);
        row.querySelector(".revisions").textContent = revision.number;
      });
    });
  });
  document.querySelectorAll("form.relabel").forEach(function (form) {
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      const ids = Array.from(form.querySelectorAll("input[name=labeler_ids]:checked")).map((i) => parseInt(i.value, 10));
      post(`/api/images/${form.dataset.image}/relabel/`, { labeler_ids: ids, reason: form.reason.value }, form.querySelector(".status"));
    });
  });
})();
