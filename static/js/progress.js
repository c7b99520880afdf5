// Live phase progress for leads: polls the phase's JSON every 5 s while the tab is visible.
(function () {
  "use strict";
  const url = document.currentScript.dataset.url;
  const rows = document.getElementById("progress-rows");
  const live = document.getElementById("live");
  function pct(done, total) { return total ? Math.round((100 * done) / total) : 0; }
  function cell(text, cls) { const td = document.createElement("td"); if (cls) td.className = cls; td.textContent = text; return td; }
  async function refresh() {
    if (document.hidden) return;
    try {
      const r = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!r.ok) throw new Error(r.status);
      const p = await r.json();
      document.getElementById("phase-done").textContent = p.done;
      document.getElementById("phase-assigned").textContent = p.assigned;
      document.getElementById("phase-bar").style.width = pct(p.done, p.assigned) + "%";
      rows.replaceChildren(...p.labelers.map(function (l) {
        const tr = document.createElement("tr");
        tr.append(cell(l.pseudonym), cell(l.done, "num"), cell(l.assigned, "num"), cell(l.time_spent_s + " s", "num"));
        const td = document.createElement("td");
        td.innerHTML = '<div class="progress"><div></div></div>';
        td.querySelector(".progress > div").style.width = pct(l.done, l.assigned) + "%";
        tr.append(td);
        return tr;
      }));
      live.textContent = "live · updated " + new Date().toLocaleTimeString();
    } catch (e) {
      live.textContent = "live updates paused (network)";
    }
  }
  setInterval(refresh, 5000);
})();
