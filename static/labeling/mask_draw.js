// Skin polygon editor of the mask sample (issue 21): mouse and keyboard, no library, served locally.
// Points are kept as fractions of the image (0..1) and posted to the API, which rasterises the mask
// at the image's own size.
(function () {
  "use strict";
  const editor = document.getElementById("mask-editor");
  if (!editor) return;
  const img = document.getElementById("mask-image");
  const canvas = document.getElementById("mask-canvas");
  const status = document.getElementById("mask-status");
  const result = document.getElementById("mask-result");
  const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
  const ctx = canvas.getContext("2d");
  let points = JSON.parse(document.getElementById("mask-polygon").textContent || "[]");
  let cross = [0.5, 0.5];
  let dragging = -1;
  let dirty = false;

  function size() {
    const rect = img.getBoundingClientRect();
    canvas.width = Math.max(1, Math.round(rect.width));
    canvas.height = Math.max(1, Math.round(rect.height));
    draw();
  }
  function toPixels(p) { return [p[0] * canvas.width, p[1] * canvas.height]; }
  function fromEvent(e) {
    const rect = canvas.getBoundingClientRect();
    return [Math.min(1, Math.max(0, (e.clientX - rect.left) / rect.width)),
            Math.min(1, Math.max(0, (e.clientY - rect.top) / rect.height))];
  }
  function nearest(p) {
    let best = -1, bestDistance = 10; // pixels
    points.forEach(function (q, i) {
      const a = toPixels(p), b = toPixels(q);
      const d = Math.hypot(a[0] - b[0], a[1] - b[1]);
      if (d < bestDistance) { best = i; bestDistance = d; }
    });
    return best;
  }
  function say(text, error) {
    status.textContent = text;
    status.className = "small status" + (error ? " error" : "");
  }
  function changed() {
    dirty = true;
    say(points.length + " points" + (points.length < 3 ? " (3 or more to save)" : ", not saved yet"));
    draw();
  }
  function draw() {
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    if (points.length) {
      ctx.beginPath();
      points.forEach(function (p, i) {
        const [x, y] = toPixels(p);
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      });
      if (points.length > 2) ctx.closePath();
      ctx.fillStyle = "rgba(0, 210, 255, 0.25)";
      ctx.strokeStyle = "rgb(0, 210, 255)";
      ctx.lineWidth = 2;
      if (points.length > 2) ctx.fill();
      ctx.stroke();
      points.forEach(function (p) {
        const [x, y] = toPixels(p);
        ctx.fillStyle = "#fff";
        ctx.fillRect(x - 3, y - 3, 6, 6);
        ctx.strokeRect(x - 3, y - 3, 6, 6);
      });
    }
    if (document.activeElement === canvas) {
      const [x, y] = toPixels(cross);
      ctx.strokeStyle = "rgb(255, 200, 0)";
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x - 8, y); ctx.lineTo(x + 8, y); ctx.moveTo(x, y - 8); ctx.lineTo(x, y + 8);
      ctx.stroke();
    }
  }
  function save() {
    const form = editor.closest("form") || editor;
    return window.fairtoneBusy(form, send); // the save button is disabled while it saves
  }
  async function send() {
    if (points.length < 3) { say("A polygon needs 3 points or more.", true); return; }
    say("saving…");
    try {
      const r = await fetch(editor.dataset.url, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": token, Accept: "application/json" },
        body: JSON.stringify({ points: points }),
      });
      const data = await r.json().catch(() => ({}));
      if (!r.ok) throw new Error(data.detail || Object.entries(data).map(([k, v]) => `${k}: ${[].concat(v).join(" ")}`).join("; ") || `error ${r.status}`);
      dirty = false;
      say("saved: " + points.length + " points");
      const automatic = data.automatic_face_found === false ? "no face found" :
        (data.automatic_ita === null ? "—" : data.automatic_ita.toFixed(1) + "°");
      result.textContent = data.masked_ita === null ? (data.error || "") :
        `Masked ITA ${data.masked_ita.toFixed(1)}°, automatic ${automatic} (${data.code_version}).`;
    } catch (e) {
      say(e.message || "failed", true);
    }
  }

  canvas.addEventListener("mousedown", function (e) {
    canvas.focus();
    const p = fromEvent(e);
    cross = p;
    if (e.button === 2) return;
    const i = nearest(p);
    if (i >= 0) { dragging = i; return; }
    points.push(p);
    changed();
  });
  canvas.addEventListener("mousemove", function (e) {
    if (dragging < 0) return;
    points[dragging] = fromEvent(e);
    cross = points[dragging];
    changed();
  });
  window.addEventListener("mouseup", function () { dragging = -1; });
  canvas.addEventListener("contextmenu", function (e) {
    e.preventDefault();
    const i = nearest(fromEvent(e));
    if (i >= 0) { points.splice(i, 1); changed(); }
  });
  canvas.addEventListener("keydown", function (e) {
    const step = (e.shiftKey ? 10 : 1);
    const dx = step / canvas.width, dy = step / canvas.height;
    const moves = { ArrowLeft: [-dx, 0], ArrowRight: [dx, 0], ArrowUp: [0, -dy], ArrowDown: [0, dy] };
    if (moves[e.key]) {
      cross = [Math.min(1, Math.max(0, cross[0] + moves[e.key][0])), Math.min(1, Math.max(0, cross[1] + moves[e.key][1]))];
      draw();
    } else if (e.key === " ") {
      points.push(cross.slice());
      changed();
    } else if (e.key === "Backspace") {
      points.pop();
      changed();
    } else if (e.key === "Escape") {
      points = [];
      changed();
    } else if (e.key === "Enter") {
      save();
    } else {
      return;
    }
    e.preventDefault();
  });
  canvas.addEventListener("focus", draw);
  canvas.addEventListener("blur", draw);
  document.getElementById("mask-save").addEventListener("click", save);
  document.getElementById("mask-undo").addEventListener("click", function () { points.pop(); changed(); });
  document.getElementById("mask-clear").addEventListener("click", function () { points = []; changed(); });
  window.addEventListener("beforeunload", function (e) { if (dirty) { e.preventDefault(); e.returnValue = ""; } });
  window.addEventListener("resize", size);
  if (img.complete) size(); else img.addEventListener("load", size);
})();
