// The calibration page: pick images by clicking thumbnails (or paste their ids), and see before
// choosing whether the numbers leave too few images for the dashboard's statistics.
(function () {
  "use strict";
  const form = document.getElementById("calibration-form");
  if (!form) return;
  const nImages = Number(form.dataset.nImages);
  const need = Number(form.dataset.minImages);
  const textarea = form.querySelector("textarea[name=external_ids]");
  const picker = document.getElementById("picker");
  const grid = document.getElementById("picker-grid");
  const status = document.getElementById("picker-status");
  const warnings = document.getElementById("calibration-warnings");
  let page = 1;
  let hasNext = false;

  function method() {
    const checked = form.querySelector("input[name=method]:checked");
    return checked ? checked.value : "random";
  }
  function picked() {
    return [...new Set(textarea.value.split(/[\s,;]+/).filter(Boolean))];
  }
  function setPicked(ids) {
    textarea.value = ids.join(", ");
    refresh();
  }
  function number(name) {
    const v = form.querySelector(`input[name=${name}]`).value.trim();
    return v === "" ? null : Number(v);
  }
  function plural(n, word) {
    return `${n} ${word}${n === 1 ? "" : "s"}`;
  }
  function refresh() {
    const manual = method() === "manual";
    form.querySelectorAll("[data-when]").forEach((el) => {
      el.hidden = el.dataset.when !== (manual ? "manual" : "random");
    });
    const ids = picked();
    document.getElementById("picked-count").textContent = `${plural(ids.length, "image")} picked.`;
    grid.querySelectorAll(".thumb").forEach((tile) => {
      tile.classList.toggle("picked", ids.includes(tile.dataset.externalId));
      tile.setAttribute("aria-pressed", ids.includes(tile.dataset.externalId));
    });
    const size = manual ? ids.length : Math.min(number("size") || 0, nImages);
    const n1 = number("calibration_1_size") || size - Math.floor(size / 2);
    const nRep = number("n_repeated") ?? Math.min(30, n1);
    const messages = [];
    if (nRep > n1) messages.push(`Calibration 2 can repeat at most the ${plural(n1, "image")} of calibration 1: lower the number shown again.`);
    if (size > 0) {
      if (n1 < need) messages.push(`Calibration 1 would have ${plural(n1, "image")}: agreement between labelers needs at least ${need}, so the dashboard would show “too little data”.`);
      const fresh = size - n1;
      if (fresh > 0 && fresh < need) messages.push(`Calibration 2 would have ${plural(fresh, "new image")}: its agreement needs at least ${need}.`);
      if (nRep < need) messages.push(`${plural(nRep, "repeated image")}: each labeler's consistency (test-retest) needs at least ${need}.`);
    }
    const list = warnings.querySelector("ul");
    list.replaceChildren(...messages.map((m) => Object.assign(document.createElement("li"), { textContent: m })));
    warnings.hidden = messages.length === 0;
  }

  async function load() {
    const search = document.getElementById("picker-search").value.trim();
    const url = new URL(picker.dataset.url, location.href);
    url.searchParams.set("page", page);
    if (search) url.searchParams.set("search", search);
    status.textContent = "Loading…";
    const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) {
      status.textContent = "The images could not be loaded.";
      return;
    }
    const body = await response.json();
    hasNext = Boolean(body.next);
    const pages = Math.max(1, Math.ceil(body.count / 50));
    status.textContent = `${plural(body.count, "image")}${search ? " found" : ""} · page ${page} of ${pages}`;
    grid.replaceChildren(
      ...body.results.map((image) => {
        const tile = document.createElement("button");
        tile.type = "button";
        tile.className = "thumb";
        tile.dataset.externalId = image.external_id;
        tile.title = `Pick or unpick ${image.external_id}`;
        const img = document.createElement("img");
        img.loading = "lazy";
        img.src = image.thumbnail_url;
        img.alt = image.external_id;
        const caption = document.createElement("span");
        caption.textContent = image.external_id;
        tile.append(img, caption);
        tile.addEventListener("click", () => {
          const ids = picked();
          const at = ids.indexOf(image.external_id);
          if (at >= 0) ids.splice(at, 1);
          else ids.push(image.external_id);
          setPicked(ids);
        });
        return tile;
      })
    );
    document.getElementById("picker-prev").disabled = page <= 1;
    document.getElementById("picker-next").disabled = !hasNext;
    refresh();
  }

  let searchTimer = null;
  document.getElementById("picker-search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      page = 1;
      load();
    }, 250);
  });
  document.getElementById("picker-prev").addEventListener("click", () => {
    if (page > 1) {
      page -= 1;
      load();
    }
  });
  document.getElementById("picker-next").addEventListener("click", () => {
    if (hasNext) {
      page += 1;
      load();
    }
  });
  form.addEventListener("input", refresh);
  form.addEventListener("change", refresh);
  refresh();
  load();
})();
