// Post-calibration review: corrections and relabel requests through the API.
(function () {
  "use strict";
  const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
  // The form's buttons are disabled while its request runs (static/js/busy.js).
  function post(url, body, statusEl) {
    return window.fairtoneBusy(statusEl.closest("form"), () => send(url, body, statusEl));
  }
  async function send(url, body, statusEl) {
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
        // "4" or an adjacent pair "3+4"
        tones: form.tones.value.split("+").map((t) => parseInt(t, 10)), reason: form.reason.value,
      }, form.querySelector(".status")).then(function (revision) {
        if (!revision) return;
        const row = form.closest("tr");
        const chosen = revision.tone_high ? `${revision.tone_low}+${revision.tone_high}` : String(revision.tone_low);
        row.querySelector(".selection").textContent = chosen + " (corrected)";
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
  // Accept / resolve / back to review: the image's state and the progress counts follow.
  const progress = document.getElementById("review-progress");
  const STATE_TEXT = { accepted: "accepted as labelled", resolved: "resolved", open: "to review" };
  document.querySelectorAll("form.decision").forEach(function (form) {
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      const state = e.submitter ? e.submitter.value : "accepted";
      post(progress.dataset.url, { image: parseInt(form.dataset.image, 10), state: state, note: form.note.value },
        form.querySelector(".status")).then(function (counts) {
        if (!counts) return;
        const card = form.closest("section.review");
        card.dataset.state = state;
        card.className = `card review state-${state}`;
        const badge = card.querySelector(".review-state");
        badge.dataset.state = state;
        badge.textContent = STATE_TEXT[state];
        form.querySelector(".reopen").hidden = state === "open";
        for (const key of ["accepted", "resolved", "open", "decided"]) {
          document.getElementById(`n-${key}`).textContent = counts[key];
        }
        document.getElementById("n-waiting").textContent = counts.waiting_relabel;
        document.getElementById("n-relabelled").textContent = counts.relabelled;
        const total = counts.open + counts.waiting_relabel + counts.relabelled + counts.decided;
        document.getElementById("review-bar").style.width = `${total ? (100 * counts.decided) / total : 0}%`;
      });
    });
  });
})();
