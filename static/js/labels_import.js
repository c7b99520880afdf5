// Import labels made elsewhere into a phase, and show the per-row report.
(function () {
  "use strict";
  const form = document.getElementById("labels-import");
  if (!form) return;
  const out = document.getElementById("labels-import-report");
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    window.fairtoneBusy(form, () => send()); // the button is disabled while the file is imported
  });
  async function send() {
    const data = new FormData();
    data.append("file", form.file.files[0]);
    out.textContent = "Importing…";
    const r = await fetch(form.dataset.url, {
      method: "POST", body: data, credentials: "same-origin",
      headers: { "X-CSRFToken": form.querySelector("input[name=csrfmiddlewaretoken]").value, Accept: "application/json" },
    });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) {
      out.className = "error";
      out.textContent = body.detail || Object.values(body).flat().join(" ") || `Error ${r.status}`;
      return;
    }
    out.className = "";
    const table = document.createElement("table");
    table.innerHTML = "<thead><tr><th class='num'>Row</th><th>Image</th><th>Outcome</th><th>Reason</th></tr></thead>";
    const tbody = document.createElement("tbody");
    for (const row of body.rows) {
      const tr = document.createElement("tr");
      for (const value of [row.row, row.image_id, row.outcome, row.reason]) {
        const td = document.createElement("td");
        td.textContent = value;
        tr.append(td);
      }
      tbody.append(tr);
    }
    table.append(tbody);
    const summary = document.createElement("p");
    summary.textContent = `${body.imported} imported, ${body.rejected} rejected.`;
    out.replaceChildren(summary, table);
  }
})();
