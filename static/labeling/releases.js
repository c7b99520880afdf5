// Live progress of the releases being built: polls each one's JSON (/api/projects/<id>/releases/<v>/)
// every 2.5 s while it is queued or running and the tab is visible; reloads the page once none is.
(function () {
  "use strict";
  const STATUS = { queued: "Queued", running: "Running", published: "Published", failed: "Failed", cancelled: "Cancelled" };
  const rows = Array.from(document.querySelectorAll(".release-row")).filter(function (row) {
    return row.dataset.status === "queued" || row.dataset.status === "running";
  });
  if (!rows.length) return;
  let timer = null;

  function show(row, release) {
    const job = release.job || { done: 0, total: 0 };
    const bar = row.querySelector("[data-role=bar]");
    if (bar) bar.style.width = (job.total ? Math.round((100 * job.done) / job.total) : 0) + "%";
    const count = row.querySelector("[data-role=count]");
    if (count) count.textContent = job.done + " / " + job.total;
    const badge = row.querySelector("[data-role=status]");
    if (badge) badge.textContent = STATUS[release.status] || release.status;
    row.dataset.status = release.status;
  }

  async function refresh() {
    if (document.hidden) return;
    let active = 0;
    for (const row of rows) {
      if (row.dataset.status !== "queued" && row.dataset.status !== "running") continue;
      try {
        const r = await fetch(row.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        if (!r.ok) throw new Error(String(r.status));
        show(row, await r.json());
      } catch (e) {
        // Paused on a network error; the next tick tries again.
      }
      if (row.dataset.status === "queued" || row.dataset.status === "running") active += 1;
    }
    if (!active) {
      clearInterval(timer);
      window.location.reload();
    }
  }
  timer = setInterval(refresh, 2500);
})();
