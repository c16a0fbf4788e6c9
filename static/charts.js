// Draws every figure listed in the page's JSON data block into its [data-chart] element.
(function () {
  "use strict";
  const data = document.getElementById("charts-data");
  if (!data || !window.Plotly) return;
  const figures = JSON.parse(data.textContent);
  document.querySelectorAll("[data-chart]").forEach((el) => {
    const figure = figures[el.dataset.chart];
    if (figure) Plotly.newPlot(el, figure.data, figure.layout, {displaylogo: false, responsive: true});
  });
  document.body.dataset.chartsDrawn = "true";
})();

// Picking another source reloads the statistics with that reviewer's tags.
(function () {
  "use strict";
  const source = document.getElementById("stats-source");
  if (source) source.addEventListener("change", () => source.form.requestSubmit());
})();
