/* FairTone: the labeler's labeling page. Vanilla JS (ES2020), no dependencies.
 *
 * Blind labeling: this script only ever receives the picture (id, size, URL) and
 * the labeler's own answers; it never asks for other labels, consensus or a
 * computed tone.
 *
 * Answers are never lost or doubled: each answer gets its own client_id, is put
 * in a small pending queue in localStorage (per user and phase) before it is
 * sent, and is retried with backoff until the server accepts it. The server is
 * idempotent on client_id, so a retry of a request that did arrive is harmless.
 *
 * Scales with more than 10 tones: type the tone's number with two digits
 * quickly (within 0.8 s), e.g. 1 then 2 for tone 12.
 *
 * A photo of several people comes once per person, with that person's box
 * (pixels of the photo): the box is outlined and the rest of the photo faded
 * towards the neutral grey surround (never darkened: a dark surround would
 * make the skin look lighter); Z zooms to the person and back.
 */
(() => {
  "use strict";

  const $ = (id) => document.getElementById(id);

  function readConfig() {
    let value = JSON.parse($("label-config").textContent);
    if (typeof value === "string") value = JSON.parse(value); // tolerate a pre-serialised config
    return value;
  }

  const config = readConfig();
  const USER = $("label-script")?.dataset.user || "";
  const PENDING_KEY = `fairtone.pending.${USER}.${config.phaseId}`;
  const N_TONES = config.tones.length;
  const TONE = new Map(config.tones.map((t) => [t.position, t]));
  const PHASE_OPEN = config.phaseStatus === "open";
  const TWO_DIGIT_WINDOW_MS = 800;
  const MAX_ZOOM = 8;
  const PAN_STEP = 60;
  const RETRY_MAX_MS = 30000;

  const ui = {
    stage: $("stage"),
    canvas: $("stage-canvas"),
    stageState: $("stage-state"),
    skipPanel: $("skip-panel"),
    skipReasons: $("skip-reasons"),
    completePanel: $("complete-panel"),
    instructions: $("instructions-panel"),
    toast: $("toast"),
    swatches: $("swatch-row"),
    saveStatus: $("save-status"),
    progressBar: $("progress-bar"),
    progressText: $("progress-text"),
    reviewNote: $("review-note"),
    answerValue: $("answer-value"),
    answerFlags: $("answer-flags"),
    submitButton: $("submit-button"),
    boxNote: $("box-note"),
    uncertainButton: $("uncertain-button"),
    skipButton: $("skip-button"),
    forwardButton: $("forward-button"),
  };

  const emptySelection = () => ({ tones: [], primary: null, uncertain: false, skipReason: "" });

  const state = {
    history: [], // my answered images, in phase order: {image, display_url, box, width, height, tones, uncertain, skip_reason, n_revisions, saving}
    current: null, // head of my queue (an assignment from the API)
    upcoming: null, // the assignment after it, preloaded
    done: 0,
    total: 0,
    started: false,
    reviewIndex: null, // index into history while going back, else null
    selection: emptySelection(),
    shownId: null,
    imageReady: false,
    skipOpen: false,
    digitBuffer: null,
    view: { zoom: 1, x: 0, y: 0 },
  };
  const drafts = new Map(); // imageId -> selection not yet submitted
  const timeByImage = new Map(); // imageId -> ms already spent (visible) on it
  const timer = { imageId: null, accumulated: 0, since: null };

  /* ---------- small helpers ---------- */

  function uuid() {
    if (window.crypto?.randomUUID) return window.crypto.randomUUID();
    // randomUUID needs a secure context; getRandomValues does not.
    const b = window.crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  function csrfToken() {
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (match) return decodeURIComponent(match[1]);
    return document.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";
  }

  function media(query) {
    return window.matchMedia ? window.matchMedia(query).matches : null;
  }

  /** What the browser tells about the display: it changes how a tone is perceived. */
  function clientInfo() {
    const gamut = media("(color-gamut: rec2020)")
      ? "rec2020"
      : media("(color-gamut: p3)")
        ? "p3"
        : media("(color-gamut: srgb)")
          ? "srgb"
          : "unknown";
    const scheme = media("(prefers-color-scheme: dark)") ? "dark" : "light";
    const uaData = navigator.userAgentData;
    const brand = uaData?.brands?.find((b) => !/not.?a.?brand/i.test(b.brand));
    return {
      screenWidth: window.screen.width,
      screenHeight: window.screen.height,
      devicePixelRatio: window.devicePixelRatio,
      colorDepth: window.screen.colorDepth,
      colorGamut: gamut,
      gamutP3: media("(color-gamut: p3)"),
      gamutRec2020: media("(color-gamut: rec2020)"),
      gamutSrgb: media("(color-gamut: srgb)"),
      dynamicRangeHigh: media("(dynamic-range: high)"),
      prefersColorScheme: scheme,
      innerWidth: window.innerWidth,
      innerHeight: window.innerHeight,
      platform: uaData?.platform || navigator.platform || "",
      mobile: uaData ? uaData.mobile : null,
      browser: brand ? `${brand.brand} ${brand.version}` : "",
    };
  }

  let toastTimer = null;
  // A warning about the current answer goes as soon as the answer no longer has the problem
  // (``fixedWhen`` turns true on a later render), not only when its timer runs out.
  let toastFixedWhen = null;
  // The image a message is about (null: about the phase or the saving): it goes when another image is shown,
  // so "Skip: …, press Enter" no longer stays over the previous image after Backspace.
  let toastImage = null;
  function flash(message, kind = "info", fixedWhen = null) {
    ui.toast.textContent = message;
    ui.toast.dataset.kind = kind;
    ui.toast.hidden = false;
    toastFixedWhen = fixedWhen;
    toastImage = null;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => {
      ui.toast.hidden = true;
      toastFixedWhen = null;
    }, kind === "error" ? 6000 : 2600);
  }
  /** A message about the image on screen. */
  function flashHere(message, kind = "info", fixedWhen = null) {
    flash(message, kind, fixedWhen);
    toastImage = state.shownId;
  }
  function clearToastOf(previousImage) {
    if (toastImage !== null && toastImage === previousImage && !ui.toast.hidden) {
      ui.toast.hidden = true;
      toastFixedWhen = null;
      toastImage = null;
      clearTimeout(toastTimer);
    }
  }
  function clearFixedToast() {
    if (toastFixedWhen && !ui.toast.hidden && toastFixedWhen()) {
      ui.toast.hidden = true;
      toastFixedWhen = null;
      clearTimeout(toastTimer);
    }
  }

  function toneText(position) {
    const t = TONE.get(position);
    if (!t) return String(position);
    const code = t.code && t.code !== String(position) ? ` (${t.code})` : "";
    return `${position}${code} · ${t.name}`;
  }

  function answerText(a) {
    if (a.skipReason) return `Skipped: ${a.skipReason}`;
    if (a.tones.length === 2) return `Between ${a.tones[0]} and ${a.tones[1]}`;
    if (a.tones.length === 1) return toneText(a.tones[0]);
    return "Nothing chosen yet";
  }

  function fromHistory(h) {
    const tones = (h.tones || []).slice().sort((x, y) => x - y);
    return { tones, primary: tones[0] ?? null, uncertain: !!h.uncertain, skipReason: h.skip_reason || "" };
  }

  function sameAnswer(a, b) {
    return (
      a.skipReason === b.skipReason &&
      a.uncertain === b.uncertain &&
      a.tones.length === b.tones.length &&
      a.tones.every((t, i) => t === b.tones[i])
    );
  }

  /* ---------- time spent (visible time only) ---------- */

  function timerPause() {
    if (timer.since !== null) {
      timer.accumulated += performance.now() - timer.since;
      timer.since = null;
    }
  }

  function timerRun() {
    if (timer.since === null && state.imageReady && document.visibilityState === "visible") {
      timer.since = performance.now();
    }
  }

  function timerSwitch(imageId) {
    timerPause();
    if (timer.imageId !== null && timer.accumulated > 0) timeByImage.set(timer.imageId, timer.accumulated);
    timer.imageId = imageId;
    timer.accumulated = imageId === null ? 0 : timeByImage.get(imageId) || 0;
  }

  function timerTake() {
    timerPause();
    const ms = Math.round(timer.accumulated);
    timer.accumulated = 0;
    timeByImage.delete(timer.imageId);
    return ms;
  }

  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") timerRun();
    else timerPause();
  });

  /* ---------- images: preload, display, zoom and pan ---------- */

  const imageCache = new Map(); // url -> HTMLImageElement
  function preload(url) {
    let img = imageCache.get(url);
    if (!img) {
      img = new Image();
      img.decoding = "async";
      img.alt = "Image to label";
      img.draggable = false;
      img.className = "stage-image";
      img.src = url;
      imageCache.set(url, img);
      if (imageCache.size > 12) imageCache.delete(imageCache.keys().next().value);
    }
    return img;
  }

  /** The box as fractions of the photo ({x, y, w, h} in 0..1), or null for a whole photo. */
  function boxFraction(box, width, height) {
    if (!box || !width || !height) return null;
    return { x: box.x / width, y: box.y / height, w: box.width / width, h: box.height / height };
  }

  /** The picture on the stage: a frame (what zoom and pan move) holding the image and, for a box, its mark. */
  function displayImage(url, box) {
    const img = preload(url);
    const frame = document.createElement("div");
    frame.className = "stage-frame";
    frame.append(img);
    state.box = box;
    if (box) {
      const mark = document.createElement("div");
      mark.className = "box-mark";
      mark.id = "box-mark";
      mark.style.left = `${100 * box.x}%`;
      mark.style.top = `${100 * box.y}%`;
      mark.style.width = `${100 * box.w}%`;
      mark.style.height = `${100 * box.h}%`;
      frame.append(mark);
    }
    ui.canvas.replaceChildren(frame);
    ui.stage.classList.toggle("has-box", !!box);
    state.view = { zoom: 1, x: 0, y: 0 };
    state.imageReady = img.complete && img.naturalWidth > 0;
    if (state.imageReady) {
      ui.stageState.hidden = true;
      layout();
      timerRun();
      return;
    }
    ui.stageState.textContent = "Loading image…";
    ui.stageState.hidden = false;
    const onLoad = () => {
      if (ui.canvas.firstElementChild !== frame) return;
      state.imageReady = true;
      ui.stageState.hidden = true;
      layout();
      timerRun(); // the time starts when the picture is on screen
    };
    const onError = () => {
      if (ui.canvas.firstElementChild !== frame) return;
      imageCache.delete(url);
      ui.stageState.textContent = "This image could not be loaded. Reload the page, or skip it (S).";
    };
    img.addEventListener("load", onLoad, { once: true });
    img.addEventListener("error", onError, { once: true });
  }

  function clearImage() {
    ui.canvas.replaceChildren();
    ui.stage.classList.remove("has-box");
    state.box = null;
    state.imageReady = false;
  }

  /** The fitted size of the picture on the stage (before zoom), or null before it has loaded. */
  function fitted() {
    const frame = ui.canvas.firstElementChild;
    const img = frame?.firstElementChild;
    if (!img || !img.naturalWidth) return null;
    const cw = ui.canvas.clientWidth;
    const ch = ui.canvas.clientHeight;
    const fit = Math.min((cw - 24) / img.naturalWidth, (ch - 24) / img.naturalHeight);
    return { frame, cw, ch, w: img.naturalWidth * fit, h: img.naturalHeight * fit };
  }

  function layout() {
    const f = fitted();
    if (!f) return;
    const { frame, cw, ch, w, h } = f;
    const v = state.view;
    const maxX = Math.max(0, (w * v.zoom - cw) / 2 + 12);
    const maxY = Math.max(0, (h * v.zoom - ch) / 2 + 12);
    v.x = v.zoom === 1 ? 0 : Math.min(maxX, Math.max(-maxX, v.x));
    v.y = v.zoom === 1 ? 0 : Math.min(maxY, Math.max(-maxY, v.y));
    frame.style.width = `${w}px`;
    frame.style.height = `${h}px`;
    frame.style.transform = `translate(-50%, -50%) translate(${v.x}px, ${v.y}px) scale(${v.zoom})`;
    frame.style.setProperty("--zoom", String(v.zoom)); // the box's outline stays 2 px on screen
    ui.stage.classList.toggle("zoomed", v.zoom > 1);
  }

  /** Zoom by ``factor`` keeping the stage point (px, py), relative to the centre, fixed. */
  function zoomBy(factor, px = 0, py = 0) {
    const v = state.view;
    const zoom = Math.min(MAX_ZOOM, Math.max(1, v.zoom * factor));
    const ux = (px - v.x) / v.zoom;
    const uy = (py - v.y) / v.zoom;
    v.x = px - ux * zoom;
    v.y = py - uy * zoom;
    v.zoom = zoom;
    layout();
  }

  function panBy(dx, dy) {
    state.view.x += dx;
    state.view.y += dy;
    layout();
  }

  function resetZoom() {
    state.view = { zoom: 1, x: 0, y: 0 };
    layout();
  }

  /** Z: zoom to the person's box (it then fills most of the stage), or back to the whole photo. */
  function zoomToBox() {
    const box = state.box;
    const f = fitted();
    if (!box) {
      flash("This image is one person's photo: + and − zoom.");
      return;
    }
    if (!f) return;
    if (state.view.zoom > 1) {
      resetZoom();
      return;
    }
    const zoom = Math.min(MAX_ZOOM, Math.max(1, 0.85 * Math.min(f.cw / (box.w * f.w), f.ch / (box.h * f.h))));
    // The box's centre, from the picture's centre, in fitted pixels; moved to the stage's centre.
    const px = (box.x + box.w / 2 - 0.5) * f.w;
    const py = (box.y + box.h / 2 - 0.5) * f.h;
    state.view = { zoom, x: -px * zoom, y: -py * zoom };
    layout();
  }

  ui.stage.addEventListener(
    "wheel",
    (e) => {
      if (!ui.canvas.firstElementChild) return;
      e.preventDefault();
      const r = ui.canvas.getBoundingClientRect();
      zoomBy(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left - r.width / 2, e.clientY - r.top - r.height / 2);
    },
    { passive: false },
  );

  let drag = null;
  ui.canvas.addEventListener("pointerdown", (e) => {
    if (state.view.zoom <= 1 || e.button !== 0) return;
    drag = { id: e.pointerId, x: e.clientX, y: e.clientY };
    ui.canvas.setPointerCapture(e.pointerId);
    ui.stage.classList.add("dragging");
  });
  ui.canvas.addEventListener("pointermove", (e) => {
    if (!drag || e.pointerId !== drag.id) return;
    panBy(e.clientX - drag.x, e.clientY - drag.y);
    drag.x = e.clientX;
    drag.y = e.clientY;
  });
  const endDrag = () => {
    drag = null;
    ui.stage.classList.remove("dragging");
  };
  ui.canvas.addEventListener("pointerup", endDrag);
  ui.canvas.addEventListener("pointercancel", endDrag);
  new ResizeObserver(() => layout()).observe(ui.canvas);

  /* ---------- what is on screen ---------- */

  function shownItem() {
    if (state.reviewIndex !== null) {
      const h = state.history[state.reviewIndex];
      return { imageId: h.image, url: h.display_url, box: h.box || null, width: h.width, height: h.height, review: h };
    }
    if (state.current)
      return {
        imageId: state.current.image.id,
        url: state.current.image.display_url,
        box: state.current.image.box || null,
        width: state.current.image.width,
        height: state.current.image.height,
        review: null,
        kind: state.current.kind,
        request_reason: state.current.request_reason || "",
      };
    return null;
  }

  function show() {
    closeSkip();
    const item = shownItem();
    const id = item ? item.imageId : null;
    if (id !== state.shownId) {
      // Keep an unsubmitted choice if the labeler comes back to this image.
      if (state.shownId !== null && state.selection) drafts.set(state.shownId, state.selection);
      clearToastOf(state.shownId);
      timerSwitch(id);
      state.shownId = id;
      state.digitBuffer = null;
      if (item) {
        state.selection = drafts.get(id) || (item.review ? fromHistory(item.review) : emptySelection());
        drafts.delete(id);
        displayImage(item.url, boxFraction(item.box, item.width, item.height));
      } else {
        state.selection = emptySelection();
        clearImage();
      }
    }
    if (!state.selection) state.selection = emptySelection();
    const complete = !item && state.started && state.done >= state.total;
    ui.completePanel.hidden = !complete;
    if (!item) {
      ui.stageState.hidden = complete;
      ui.stageState.textContent = state.started
        ? "Waiting for the next image… (your answers are being saved)"
        : "Loading…";
    }
    render();
  }

  function render() {
    const sel = state.selection;
    const item = shownItem();
    clearFixedToast();
    for (const button of ui.swatches.querySelectorAll("button")) {
      const pos = Number(button.dataset.position);
      button.setAttribute("aria-pressed", String(sel.tones.includes(pos)));
    }
    ui.answerValue.textContent = item ? answerText(sel) : "–";
    const flags = [];
    if (sel.uncertain) flags.push("uncertain");
    if (sel.tones.length === 2) flags.push("a pair of adjacent tones");
    ui.answerFlags.textContent = flags.join(" · ");
    ui.uncertainButton.setAttribute("aria-pressed", String(sel.uncertain));
    ui.submitButton.disabled = !item || !PHASE_OPEN;
    ui.uncertainButton.disabled = !item;
    ui.skipButton.disabled = !item;
    ui.forwardButton.disabled = state.reviewIndex === null;
    ui.boxNote.hidden = !item?.box;

    if (item?.review) {
      const h = item.review;
      const changed = h.n_revisions > 1 || h.changed;
      ui.reviewNote.hidden = false;
      ui.reviewNote.textContent =
        `Going back: answer ${state.reviewIndex + 1} of ${state.history.length}. ` +
        (PHASE_OPEN ? "Change it and press Enter (kept as a new revision), or ] to move on." : "The phase is closed.") +
        (changed ? ` Changed${h.n_revisions > 1 ? ` (revision ${h.n_revisions})` : ""}.` : "");
      ui.reviewNote.dataset.changed = String(!!changed);
    } else if (item?.request_reason) {
      // An image a lead sent back: say that it is a relabel, and why.
      ui.reviewNote.hidden = false;
      ui.reviewNote.dataset.changed = "false";
      ui.reviewNote.textContent =
        (item.kind === "relabel" ? "Sent back to you for relabeling. " : "Added by the lead. ") +
        `The lead's reason: ${item.request_reason}`;
    } else {
      ui.reviewNote.hidden = PHASE_OPEN;
      ui.reviewNote.textContent = PHASE_OPEN ? "" : "This phase is not open: answers cannot be submitted.";
    }

    const pct = state.total ? Math.round((100 * state.done) / state.total) : 0;
    ui.progressBar.style.width = `${pct}%`;
    ui.progressText.textContent = state.started ? `${state.done} of ${state.total} images done` : "–";
  }

  /* ---------- choosing an answer ---------- */

  function selectTone(position) {
    if (!TONE.has(position)) return;
    const sel = state.selection;
    state.selection = { tones: [position], primary: position, uncertain: sel.uncertain, skipReason: "" };
    render();
  }

  function pairTone(position) {
    if (!TONE.has(position)) return;
    if (!config.allowPairs) {
      flashHere("This project asks for a single tone.");
      return;
    }
    const sel = state.selection;
    const primary = sel.primary;
    if (primary === null || sel.skipReason) return selectTone(position);
    if (position === primary) {
      state.selection = { ...sel, tones: [primary] };
    } else if (Math.abs(position - primary) !== 1) {
      const options = [primary - 1, primary + 1].filter((p) => TONE.has(p)).join(" or ");
      flashHere(`Only adjacent tones can be paired: ${primary} with ${options}.`, "warn", () => state.selection !== sel);
      return;
    } else {
      state.selection = { ...sel, tones: [Math.min(primary, position), Math.max(primary, position)] };
    }
    render();
  }

  function digitKey(digit) {
    if (N_TONES <= 10) return digit === 0 ? 10 : digit;
    const now = performance.now();
    const buffer = state.digitBuffer;
    state.digitBuffer = null;
    if (buffer && now - buffer.at < TWO_DIGIT_WINDOW_MS) {
      const two = buffer.value * 10 + digit;
      if (two <= N_TONES) return two;
    }
    if (digit >= 1) state.digitBuffer = { value: digit, at: now };
    return digit;
  }

  function toggleUncertain() {
    if (!config.offerUncertain || !shownItem()) return;
    state.selection = { ...state.selection, uncertain: !state.selection.uncertain };
    render();
  }

  function openSkip() {
    if (!shownItem()) return;
    if (!config.skipReasons.length) {
      flash("This project does not offer skipping.");
      return;
    }
    state.skipOpen = true;
    ui.skipPanel.hidden = false;
  }

  function closeSkip() {
    state.skipOpen = false;
    ui.skipPanel.hidden = true;
  }

  function chooseSkip(reason) {
    state.selection = { tones: [], primary: null, uncertain: state.selection.uncertain, skipReason: reason };
    closeSkip();
    flashHere(`Skip: ${reason}. Press Enter to submit.`);
    render();
  }

  function toggleInstructions() {
    ui.instructions.hidden = !ui.instructions.hidden;
  }

  /* ---------- going back and forth ---------- */

  function goBack() {
    if (state.reviewIndex === null) {
      if (!state.history.length) {
        flash("No earlier image in this phase yet.");
        return;
      }
      state.reviewIndex = state.history.length - 1;
    } else if (state.reviewIndex > 0) {
      state.reviewIndex -= 1;
    } else {
      flash("This is your first answer of the phase.");
      return;
    }
    show();
  }

  function goForward() {
    if (state.reviewIndex === null) return;
    state.reviewIndex = state.reviewIndex < state.history.length - 1 ? state.reviewIndex + 1 : null;
    show();
  }

  function backToNewest() {
    if (state.reviewIndex === null) return;
    state.reviewIndex = null;
    show();
  }

  /* ---------- submitting ---------- */

  function submit() {
    const item = shownItem();
    if (!item) return;
    if (!PHASE_OPEN) {
      flash("This phase is not open: answers cannot be submitted.", "warn");
      return;
    }
    const sel = state.selection;
    if (!sel.skipReason && !sel.tones.length) {
      flashHere("Choose a tone, or skip (S).", "warn", () => state.selection.tones.length > 0 || !!state.selection.skipReason);
      return;
    }
    if (!sel.skipReason && !state.imageReady) {
      flashHere("The image is still loading.", "info", () => state.imageReady);
      return;
    }
    if (item.review && sameAnswer(fromHistory(item.review), sel)) {
      goForward(); // unchanged: no new revision
      return;
    }
    const payload = {
      client_id: uuid(),
      image: item.imageId,
      tones: sel.skipReason ? [] : sel.tones,
      uncertain: sel.uncertain,
      skip_reason: sel.skipReason,
      time_spent_ms: timerTake(),
      tone_order: config.toneOrder,
      client_info: clientInfo(),
    };
    const answer = { tones: payload.tones, uncertain: sel.uncertain, skip_reason: sel.skipReason };
    const shown = { display_url: item.url, box: item.box, width: item.width, height: item.height };
    enqueue({ payload, ...shown, change: !!item.review });
    state.selection = null; // submitted: not a draft to keep
    if (item.review) {
      Object.assign(item.review, answer, { changed: true, saving: true });
      flash("Answer changed: saving it as a new revision.");
      goForward();
    } else {
      state.history.push({ image: item.imageId, ...shown, n_revisions: 0, saving: true, ...answer });
      state.done += 1;
      state.current = state.upcoming; // shown at once: it was preloaded
      state.upcoming = null;
      show();
    }
    flush();
  }

  /* ---------- the pending queue: never lost, never doubled ---------- */

  let pending = [];
  function loadPending() {
    try {
      pending = JSON.parse(localStorage.getItem(PENDING_KEY) || "[]");
      if (!Array.isArray(pending)) pending = [];
    } catch {
      pending = [];
    }
  }

  function savePending() {
    try {
      if (pending.length) localStorage.setItem(PENDING_KEY, JSON.stringify(pending));
      else localStorage.removeItem(PENDING_KEY);
    } catch {
      /* storage full or disabled: the in-memory queue still retries */
    }
  }

  function enqueue(entry) {
    pending.push(entry);
    savePending();
  }

  function setStatus(kind, text) {
    ui.saveStatus.dataset.state = kind;
    ui.saveStatus.textContent = text;
  }

  const sleepers = new Set();
  let retryDelay = 0;
  /** Exponential backoff with jitter (1 s, 2 s, 4 s… up to 30 s); coming back online wakes it. */
  function waitRetry(message = "Offline, retrying") {
    retryDelay = retryDelay ? Math.min(RETRY_MAX_MS, retryDelay * 2) : 1000;
    const waitMs = retryDelay * (0.8 + 0.4 * Math.random());
    const waiting = pending.length ? `, ${pending.length} waiting` : "";
    setStatus("retrying", `${message} in ${Math.ceil(waitMs / 1000)} s${waiting}`);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        sleepers.delete(done);
        resolve();
      };
      const t = setTimeout(done, waitMs);
      sleepers.add(done);
    });
  }
  window.addEventListener("online", () => [...sleepers].forEach((wake) => wake()));

  async function errorDetail(response) {
    try {
      const body = await response.json();
      if (body.detail) return String(body.detail);
      return Object.entries(body)
        .map(([k, v]) => `${k}: ${[].concat(v).join(" ")}`)
        .join("; ");
    } catch {
      return `HTTP ${response.status}`;
    }
  }

  let flushing = false;
  async function flush() {
    if (flushing) return;
    flushing = true;
    try {
      while (pending.length) {
        const entry = pending[0];
        setStatus("saving", pending.length > 1 ? `Saving… (${pending.length})` : "Saving…");
        let response;
        try {
          response = await fetch(config.api.labels, {
            method: "POST",
            credentials: "same-origin",
            headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrfToken() },
            body: JSON.stringify(entry.payload),
          });
        } catch {
          await waitRetry(); // network down: same client_id next time
          continue;
        }
        if (response.ok) {
          const data = await response.json();
          pending.shift();
          savePending();
          retryDelay = 0;
          onSaved(entry, data);
          continue;
        }
        const detail = await errorDetail(response);
        if (response.status >= 500 || response.status === 429 || response.status === 408) {
          await waitRetry();
          continue;
        }
        if (response.status === 401 || (response.status === 403 && /CSRF|credentials|authenticat/i.test(detail))) {
          // Signed out: keep the answers; they are sent once signed in again (then reload).
          await waitRetry("Signed out: sign in again in another tab; your answers are kept. Retrying");
          continue;
        }
        pending.shift(); // refused for good (e.g. the phase was closed): say so, do not loop
        savePending();
        onRejected(entry, detail);
      }
      setStatus("saved", "Saved");
    } finally {
      flushing = false;
    }
    if (!state.current && state.reviewIndex === null && !pending.length) refreshQueue();
  }

  function historyEntry(imageId) {
    return state.history.find((h) => h.image === imageId);
  }

  function onSaved(entry, data) {
    const h = historyEntry(entry.payload.image);
    if (h) {
      h.n_revisions = data.label?.n_revisions ?? data.revision;
      h.saving = pending.some((p) => p.payload.image === h.image);
      if (!h.saving && data.label) Object.assign(h, { tones: data.label.tones, uncertain: data.label.uncertain, skip_reason: data.label.skip_reason });
    }
    if (entry.change) flash(`Changed answer saved (revision ${data.revision}).`, "ok");
    absorb([data.next, data.preload]);
  }

  function onRejected(entry, detail) {
    flash(`An answer was not saved: ${detail}`, "error");
    const h = historyEntry(entry.payload.image);
    if (h && !entry.change) {
      // Never answered after all: put it back in the queue.
      state.history.splice(state.history.indexOf(h), 1);
      state.done = Math.max(0, state.done - 1);
      if (state.reviewIndex !== null && state.reviewIndex >= state.history.length) state.reviewIndex = null;
      refreshQueue();
    }
    render();
  }

  /** Take assignments the server says come next, skipping those answered here already. */
  function absorb(assignments) {
    const answered = new Set(state.history.map((h) => h.image));
    let changed = false;
    for (const a of assignments) {
      if (!a) continue;
      const id = a.image.id;
      if (answered.has(id) || state.current?.image.id === id || state.upcoming?.image.id === id) continue;
      if (!state.current) {
        state.current = a;
        changed = true;
      } else if (!state.upcoming) {
        state.upcoming = a;
      }
      preload(a.image.display_url);
    }
    if (changed) show();
  }

  async function getJSON(url) {
    for (;;) {
      let response = null;
      try {
        response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      } catch {
        response = null; // network down: wait and retry
      }
      if (response?.ok) {
        retryDelay = 0;
        if (!pending.length && ui.saveStatus.dataset.state === "retrying") setStatus("idle", "");
        return response.json();
      }
      if (response && response.status < 500 && response.status !== 429) throw new Error(await errorDetail(response));
      await waitRetry("Connection lost, retrying");
    }
  }

  let refreshing = false;
  async function refreshQueue() {
    if (refreshing) return;
    refreshing = true;
    try {
      const next = await getJSON(config.api.next);
      state.total = next.total;
      if (!pending.length) state.done = next.done;
      state.current = null;
      state.upcoming = null;
      absorb([next.current, next.preload]);
      show();
    } catch (err) {
      flash(`Could not load the next image: ${err.message}`, "error");
    } finally {
      refreshing = false;
    }
  }

  /* ---------- keyboard and mouse ---------- */

  function digitOf(code) {
    const m = /^(?:Digit|Numpad)(\d)$/.exec(code);
    return m ? Number(m[1]) : null;
  }

  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
    if (e.target.closest?.("input, textarea, select, [contenteditable]")) return;
    // A link or button reached with Tab keeps its own Enter.
    if (e.key === "Enter" && e.target.closest?.("a, button")) return;
    const digit = digitOf(e.code);
    if (state.skipOpen) {
      if (e.key === "Escape") closeSkip();
      else if (digit !== null && digit >= 1 && digit <= config.skipReasons.length) chooseSkip(config.skipReasons[digit - 1]);
      e.preventDefault();
      return;
    }
    if (digit !== null) {
      e.preventDefault();
      if (!shownItem()) return;
      // Shift+digit types '!' etc.: the physical key (event.code) is what counts.
      if (e.shiftKey) pairTone(digit === 0 ? 10 : digit);
      else selectTone(digitKey(digit));
      return;
    }
    const zoomed = state.view.zoom > 1;
    let handled = true;
    switch (e.key) {
      case "Enter":
        submit();
        break;
      case "Backspace":
      case "[":
      case "b":
      case "B":
        goBack();
        break;
      case "]":
        goForward();
        break;
      case "Escape":
        if (!ui.instructions.hidden) ui.instructions.hidden = true;
        else backToNewest();
        break;
      case "u":
      case "U":
        toggleUncertain();
        break;
      case "s":
      case "S":
        openSkip();
        break;
      case "i":
      case "I":
        toggleInstructions();
        break;
      case "+":
      case "=":
        zoomBy(1.25);
        break;
      case "-":
      case "_":
        zoomBy(0.8);
        break;
      case "r":
      case "R":
        resetZoom();
        break;
      case "z":
      case "Z":
        zoomToBox();
        break;
      case "ArrowLeft":
        if (zoomed) panBy(PAN_STEP, 0);
        else handled = false;
        break;
      case "ArrowRight":
        if (zoomed) panBy(-PAN_STEP, 0);
        else handled = false;
        break;
      case "ArrowUp":
        if (zoomed) panBy(0, PAN_STEP);
        else handled = false;
        break;
      case "ArrowDown":
        if (zoomed) panBy(0, -PAN_STEP);
        else handled = false;
        break;
      default:
        handled = false;
    }
    if (handled) e.preventDefault(); // also stops Enter from "clicking" a focused button a second time
  });

  const actions = {
    submit,
    uncertain: toggleUncertain,
    skip: openSkip,
    "skip-cancel": closeSkip,
    back: goBack,
    forward: goForward,
    instructions: toggleInstructions,
    "zoom-box": zoomToBox,
  };
  document.addEventListener("click", (e) => {
    const button = e.target.closest("[data-action]");
    if (!button || !actions[button.dataset.action]) return;
    e.preventDefault();
    actions[button.dataset.action]();
    button.blur(); // keys go to the page, not to the last clicked button
  });

  /* ---------- building the page ---------- */

  function buildSwatches() {
    for (const t of config.tones) {
      const li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "swatch-button";
      button.dataset.position = String(t.position);
      button.setAttribute("aria-pressed", "false");
      button.title = config.allowPairs ? "Click to choose; Shift+click to add the adjacent tone" : "Click to choose";
      const chip = document.createElement("span");
      chip.className = "swatch-chip";
      chip.style.background = t.hex;
      const caption = document.createElement("span");
      caption.className = "swatch-caption";
      const number = document.createElement("span");
      number.className = "swatch-number";
      number.textContent = String(t.position);
      const name = document.createElement("span");
      name.className = "swatch-name";
      name.textContent = t.code && t.code !== String(t.position) ? `${t.code} · ${t.name}` : t.name;
      caption.append(number, name);
      if (t.position === 10 && N_TONES <= 10) {
        const key = document.createElement("kbd");
        key.textContent = "0";
        key.title = "key 0";
        caption.append(key);
      }
      button.append(chip, caption);
      button.addEventListener("click", (e) => {
        if (!shownItem()) return;
        if (e.shiftKey) pairTone(t.position);
        else selectTone(t.position);
        button.blur();
      });
      li.append(button);
      ui.swatches.append(li);
    }
    ui.swatches.style.setProperty("--n-tones", String(N_TONES));
  }

  function buildSkipReasons() {
    config.skipReasons.slice(0, 9).forEach((reason, i) => {
      const li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.innerHTML = `<kbd>${i + 1}</kbd> `;
      button.append(document.createTextNode(reason));
      button.addEventListener("click", () => chooseSkip(reason));
      li.append(button);
      ui.skipReasons.append(li);
    });
  }

  function adaptKeymap() {
    if (N_TONES < 10) $("key-digits").textContent = `choose tone 1–${N_TONES}`;
    if (N_TONES > 10) $("key-digits").textContent = `choose a tone; two digits quickly for ${10}–${N_TONES}`;
    if (!config.allowPairs) {
      $("key-pair-dt").hidden = true;
      $("key-pair-dd").hidden = true;
    }
    if (!config.offerUncertain) {
      $("key-u-dt").hidden = true;
      $("key-u-dd").hidden = true;
      ui.uncertainButton.hidden = true;
    }
  }

  async function start() {
    buildSwatches();
    buildSkipReasons();
    adaptKeymap();
    loadPending();
    show();
    let mine;
    let next;
    try {
      [mine, next] = await Promise.all([getJSON(config.api.labels), getJSON(config.api.next)]);
    } catch (err) {
      ui.stageState.textContent = `This page could not load your queue: ${err.message}`;
      return;
    }
    state.history = mine.map((h) => ({ ...h, saving: false }));
    state.total = next.total;
    state.done = next.done;
    // Answers made before a reload and not yet saved: show them as given.
    for (const entry of pending) {
      const p = entry.payload;
      const answer = { tones: p.tones, uncertain: p.uncertain, skip_reason: p.skip_reason, saving: true };
      const h = historyEntry(p.image);
      if (h) Object.assign(h, answer, entry.change ? { changed: true } : {});
      else {
        const shown = { display_url: entry.display_url, box: entry.box || null, width: entry.width, height: entry.height };
        state.history.push({ image: p.image, ...shown, n_revisions: 0, ...answer });
        state.done += 1;
      }
    }
    state.started = true;
    absorb([next.current, next.preload]);
    show();
    if (pending.length) flush();
  }

  start();
})();
