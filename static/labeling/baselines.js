// Live progress of a baseline run: polls the job's JSON (/api/jobs/<id>/) every 2.5 s
// while the run is queued or running and the tab is visible.
(function () {
  "use strict";
  const url = document.currentScript.dataset.url;
  const live = document.getElementById("live");
  const $ = function (id) { return document.getElementById(id); };
  const STATUS = { queued: "Queued", running: "Running", done: "Done", failed: "Failed" };
  let timer = null;

  function cell(text, cls) { const td = document.createElement("td"); if (cls) td.className = cls; td.textContent = text; return td; }
  // As the server renders them: "YYYY-MM-DD HH:MM:SS" in the server time zone (UTC).
  function when(iso) { return iso ? String(iso).replace("T", " ").slice(0, 19) : "—"; }

  function show(job) {
    const processed = job.done + job.failed;
    $("job-done").textContent = job.done;
    $("job-failed").textContent = job.failed;
    $("job-total").textContent = job.total;
    $("job-bar").style.width = (job.total ? Math.round((100 * processed) / job.total) : 100) + "%";
    const badge = $("job-status");
    badge.textContent = STATUS[job.status] || job.status;
    badge.className = "badge " + job.status;
    $("job-started").textContent = when(job.started_at);
    $("job-finished").textContent = when(job.finished_at);
    const rows = (job.failures || []).map(function (f) {
      const tr = document.createElement("tr");
      const td = document.createElement("td");
      const a = document.createElement("a");
      a.href = "/images/" + encodeURIComponent(f.image_id) + "/";
      a.textContent = f.external_id || f.image_id;
      td.append(a);
      tr.append(td, cell(f.reason, "small"));
      return tr;
    });
    if (rows.length) $("job-failures").replaceChildren(...rows);
    const finished = job.status === "done" || job.status === "failed";
    if (finished) {
      $("retry-form").hidden = !job.failed;
      live.textContent = "finished";
      clearInterval(timer);
    } else {
      live.textContent = "live · updated " + new Date().toLocaleTimeString();
    }
  }

  async function refresh() {
    if (document.hidden) return;
    try {
      const r = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!r.ok) throw new Error(String(r.status));
      show(await r.json());
    } catch (e) {
      live.textContent = "live updates paused (network)";
    }
  }
  timer = setInterval(refresh, 2500);
  refresh();
})();
