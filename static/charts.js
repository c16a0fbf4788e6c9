// Draws every [data-chart] element from the figures in the page's JSON data blocks (also in
// fragments swapped in by htmx). A figure whose points carry trace ids links each point to its trace;
// one whose marks carry local URLs (meta "links": a bin, a bar) opens the URL of the mark clicked.
// A figure marked `empty` is not drawn: its page shows what to do to get data in its place.
(function () {
  "use strict";
  function drawAll() {
    if (!window.Plotly) return;
    const figures = {};
    document.querySelectorAll("script.charts-data").forEach((block) => Object.assign(figures, JSON.parse(block.textContent)));
    document.querySelectorAll("[data-chart]:not([data-drawn])").forEach((el) => {
      const figure = figures[el.dataset.chart];
      if (!figure || figure.empty) return;
      Plotly.newPlot(el, figure.data, figure.layout, {displaylogo: false, responsive: true});
      el.dataset.drawn = "true";
      el.on("plotly_click", (ev) => {
        const point = ev.points && ev.points[0];
        const id = point && point.customdata;
        if (typeof id !== "string") return;
        if (point.data.meta === "trace-links") window.location = "/traces/" + encodeURIComponent(id);
        else if (point.data.meta === "links" && id.startsWith("/")) window.location = id;  // a bin or bar: its traces
      });
    });
    document.body.dataset.chartsDrawn = "true";
  }
  drawAll();
  document.body.addEventListener("htmx:afterSwap", drawAll);
  // Picking another source reloads the statistics with that reviewer's tags.
  const source = document.getElementById("stats-source");
  if (source) source.addEventListener("change", () => source.form.requestSubmit());
})();
