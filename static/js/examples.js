// Tone examples: choose a tone, then click images to add (or remove) their ids in that tone's field.
(function () {
  "use strict";
  const picker = document.getElementById("picker");
  if (!picker) return;
  const grid = document.getElementById("picker-grid");
  const status = document.getElementById("picker-status");
  const toneSelect = document.getElementById("picker-tone");
  let page = 1;
  let hasNext = false;

  function field() {
    return document.querySelector(`#examples-form input[name="${toneSelect.value}"]`);
  }
  function ids(input) {
    return input.value.split(/[\s,;]+/).filter(Boolean);
  }
  function refresh() {
    const chosen = ids(field());
    grid.querySelectorAll(".thumb").forEach((tile) => {
      const on = chosen.includes(tile.dataset.externalId);
      tile.classList.toggle("picked", on);
      tile.setAttribute("aria-pressed", on);
    });
  }
  async function load() {
    const url = new URL(picker.dataset.url, location.href);
    url.searchParams.set("page", page);
    const search = document.getElementById("picker-search").value.trim();
    if (search) url.searchParams.set("search", search);
    status.textContent = "Loading…";
    const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) {
      status.textContent = "The images could not be loaded.";
      return;
    }
    const body = await response.json();
    hasNext = Boolean(body.next);
    status.textContent = `${body.count} image${body.count === 1 ? "" : "s"} · page ${page} of ${Math.max(1, Math.ceil(body.count / 50))}`;
    grid.replaceChildren(
      ...body.results.map((image) => {
        const tile = document.createElement("button");
        tile.type = "button";
        tile.className = "thumb";
        tile.dataset.externalId = image.external_id;
        tile.title = `Add or remove ${image.external_id}`;
        const img = Object.assign(document.createElement("img"), { loading: "lazy", src: image.thumbnail_url, alt: image.external_id });
        const caption = Object.assign(document.createElement("span"), { textContent: image.external_id });
        tile.append(img, caption);
        tile.addEventListener("click", () => {
          const input = field();
          const chosen = ids(input);
          const at = chosen.indexOf(image.external_id);
          if (at >= 0) chosen.splice(at, 1);
          else chosen.push(image.external_id);
          input.value = chosen.join(", ");
          refresh();
        });
        return tile;
      })
    );
    document.getElementById("picker-prev").disabled = page <= 1;
    document.getElementById("picker-next").disabled = !hasNext;
    refresh();
  }
  let timer = null;
  document.getElementById("picker-search").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
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
  toneSelect.addEventListener("change", refresh);
  document.getElementById("examples-form").addEventListener("input", refresh);
  load();
})();
