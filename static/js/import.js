// Uploads with a progress bar (XMLHttpRequest exposes upload progress; fetch does not).
(function () {
  "use strict";
  const script = document.currentScript;
  const reportBase = script.dataset.reportBase;
  const statusBox = document.getElementById("upload-status");
  const bar = document.getElementById("upload-bar");
  const text = document.getElementById("upload-text");

  function csrf(form) {
    const input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function send(form, data) {
    statusBox.hidden = false;
    bar.style.width = "0%";
    text.textContent = "Uploading…";
    const xhr = new XMLHttpRequest();
    xhr.open("POST", form.dataset.url);
    xhr.setRequestHeader("X-CSRFToken", csrf(form));
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.onprogress = function (e) {
      if (e.lengthComputable) {
        const pct = Math.round((100 * e.loaded) / e.total);
        bar.style.width = pct + "%";
        text.textContent = pct < 100 ? `Uploading… ${pct}%` : "Checking every file on the server…";
      }
    };
    xhr.onload = function () {
      let body = {};
      try { body = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
      if (xhr.status === 201 && body.id) {
        window.location = reportBase + body.id + "/";
      } else {
        bar.style.width = "0%";
        const detail = body.detail || Object.entries(body).map(([k, v]) => `${k}: ${[].concat(v).join(" ")}`).join("; ");
        text.textContent = `The import was refused: ${detail || "error " + xhr.status}`;
        text.className = "error";
      }
    };
    xhr.onerror = function () {
      text.textContent = "The upload failed (network). Nothing was imported; try again.";
      text.className = "error";
    };
    xhr.send(data);
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
      send(form, data);
    });
  }
})();
