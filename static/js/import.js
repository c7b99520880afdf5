// Uploads with a progress bar (XMLHttpRequest exposes upload progress; fetch does not).
// Many files are sent in chunks of CHUNK files, one import (and one report) per chunk,
// so a thousand photos never make one giant request.
(function () {
  "use strict";
  const CHUNK = 40;
  const script = document.currentScript;
  const reportBase = script.dataset.reportBase;
  const statusBox = document.getElementById("upload-status");
  const bar = document.getElementById("upload-bar");
  const text = document.getElementById("upload-text");

  function csrf(form) {
    const input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function fail(message) {
    bar.style.width = "0%";
    text.textContent = message;
    text.className = "error";
  }

  function sendOne(form, data, onProgress) {
    return new Promise(function (resolve, reject) {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", form.dataset.url);
      xhr.setRequestHeader("X-CSRFToken", csrf(form));
      xhr.setRequestHeader("Accept", "application/json");
      xhr.upload.onprogress = function (e) { if (e.lengthComputable) onProgress(e.loaded / e.total); };
      xhr.onload = function () {
        let body = {};
        try { body = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
        if (xhr.status === 201 && body.id) resolve(body);
        else reject(new Error(body.detail || Object.entries(body).map(([k, v]) => `${k}: ${[].concat(v).join(" ")}`).join("; ") || "error " + xhr.status));
      };
      xhr.onerror = function () { reject(new Error("The upload failed (network). Files already reported are imported; try the rest again.")); };
      xhr.send(data);
    });
  }

  async function send(form, data) {
    statusBox.hidden = false;
    text.className = "muted";
    bar.style.width = "0%";
    const files = data.getAll("files");
    if (files.length <= CHUNK) {
      try {
        const body = await sendOne(form, data, function (f) {
          bar.style.width = Math.round(100 * f) + "%";
          text.textContent = f < 1 ? `Uploading… ${Math.round(100 * f)}%` : "Checking every file on the server…";
        });
        window.location = reportBase + body.id + "/";
      } catch (e) { fail(`The import was refused: ${e.message}`); }
      return;
    }
    const chunks = [];
    for (let i = 0; i < files.length; i += CHUNK) chunks.push(files.slice(i, i + CHUNK));
    const totals = { imported: 0, duplicate: 0, rejected: 0 };
    for (let k = 0; k < chunks.length; k++) {
      const part = new FormData();
      for (const f of chunks[k]) part.append("files", f);
      try {
        const body = await sendOne(form, part, function (f) {
          const overall = (k + f) / chunks.length;
          bar.style.width = Math.round(100 * overall) + "%";
          text.textContent = `Uploading part ${k + 1} of ${chunks.length}… ${Math.round(100 * overall)}%`;
        });
        totals.imported += body.n_imported; totals.duplicate += body.n_duplicate; totals.rejected += body.n_rejected;
      } catch (e) {
        fail(`Part ${k + 1} of ${chunks.length} failed: ${e.message}`);
        return;
      }
    }
    bar.style.width = "100%";
    text.textContent = `Done: ${totals.imported} imported, ${totals.duplicate} duplicates, ${totals.rejected} rejected. Reports below.`;
    setTimeout(function () { window.location.reload(); }, 1500);
  }

  for (const id of ["upload-form", "zip-form", "manifest-form"]) {
    const form = document.getElementById(id);
    if (!form) continue;
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      const data = new FormData(form);
      for (const [key, value] of Array.from(data.entries())) {
        if ((value instanceof File && !value.name) || value === "") data.delete(key);
      }
      data.delete("csrfmiddlewaretoken");
      // The buttons stay disabled while the files go (static/js/busy.js); the report page follows.
      window.fairtoneBusy(form, () => send(form, data));
    });
  }
})();
