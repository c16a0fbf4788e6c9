// The /diff page (and its body loaded by htmx into a review workspace): draws the two runs from the figure in
// the page, opens a step's trace on click, zooms both runs to the first divergence on "Jump to it", and copies
// the page's address (its permalink).
(function () {
  "use strict";
  function draw(root) {
    const el = root.querySelector("[data-diff-figure]:not([data-drawn])");
    const block = root.querySelector("script.diff-figure-data");
    if (!el || !block || !window.Plotly) return;
    const figure = JSON.parse(block.textContent);
    Plotly.newPlot(el, figure.data, figure.layout, {displaylogo: false, responsive: true});
    el.dataset.drawn = "true";
    const view = el.closest(".diff-view");
    el.on("plotly_click", (ev) => {
      const point = ev.points && ev.points[0];
      if (!point || typeof point.customdata !== "string") return;
      const trace = point.data.meta === "b" ? view.dataset.b : view.dataset.a;
      window.location = "/traces/" + encodeURIComponent(trace) + "?event=" + encodeURIComponent(point.customdata);
    });
  }
  function around(t, range) {
    const half = Math.max((range[1] - range[0]) * 0.08, 0.5);
    return [t - half, t + half];
  }
  function jump(button) {
    const view = button.closest(".diff-view");
    const el = view.querySelector("[data-diff-figure]");
    if (el && el.layout && window.Plotly) {
      const update = {};
      if (button.dataset.ta !== "") update["xaxis.range"] = around(Number(button.dataset.ta), el.layout.xaxis.range || [0, 1]);
      if (button.dataset.tb !== "") update["xaxis2.range"] = around(Number(button.dataset.tb), el.layout.xaxis2.range || [0, 1]);
      Plotly.relayout(el, update);
    }
    const row = view.querySelector("#divergence-row");
    if (row) {
      row.closest("details").open = true;
      row.scrollIntoView({block: "center"});
      row.classList.add("flash");
    }
  }
  document.addEventListener("click", (ev) => {
    const button = ev.target.closest("#jump-divergence");
    if (button) { ev.preventDefault(); jump(button); return; }
    const copy = ev.target.closest("#copy-permalink");
    if (copy && navigator.clipboard) {
      navigator.clipboard.writeText(window.location.href).then(() => { copy.textContent = "Link copied"; });
    }
  });
  draw(document);
  document.body.addEventListener("htmx:afterSwap", (ev) => draw(ev.target));
  window.addEventListener("load", () => draw(document));
})();
