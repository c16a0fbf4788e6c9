// Minimap: the whole trace's concurrency curve under the graph, the time window in view shaded; a click
// centres the view there.

import {graph, state} from "./state.js";

const minimap = document.getElementById("minimap");
const SVG = "http://www.w3.org/2000/svg";
let span = null;  // [t0, t1] of the whole trace

export function drawMinimap() {
  const alive = state.payload.figure.data.find((t) => t.name === "agents alive");
  if (!minimap || !alive || !alive.x.length) return;
  // loops, not Math.max(...ys): a spread of a many-agent trace's curve passes the engine's argument limit
  const xs = alive.x, ys = alive.y;
  let top = 1, lo = Infinity, hi = -Infinity;
  ys.forEach((y) => { if (y > top) top = y; });
  xs.forEach((x) => { if (x < lo) lo = x; if (x > hi) hi = x; });
  span = [lo, hi];
  const width = Math.max(span[1] - span[0], 1e-9);
  minimap.setAttribute("viewBox", "0 0 1000 100");
  minimap.setAttribute("preserveAspectRatio", "none");
  const points = ["0,100"].concat(xs.map((x, i) => (1000 * (x - span[0]) / width).toFixed(1) + ","
                                                  + (100 - 90 * ys[i] / top).toFixed(1)), ["1000,100"]);
  const curve = document.createElementNS(SVG, "polygon"), view = document.createElementNS(SVG, "rect");
  curve.setAttribute("class", "curve"); curve.setAttribute("points", points.join(" "));
  view.setAttribute("class", "view"); view.setAttribute("y", "0"); view.setAttribute("height", "100");
  minimap.replaceChildren(curve, view);
  minimap.removeAttribute("hidden");  // an SVG element has no `hidden` property
  showWindowOnMinimap();
}

export function showWindowOnMinimap() {
  const layout = graph._fullLayout, view = minimap && minimap.querySelector(".view");
  if (!layout || !view || !span) return;
  const width = Math.max(span[1] - span[0], 1e-9);
  const [a, b] = layout.xaxis.range.map((x) => Math.max(0, Math.min(1000, 1000 * (x - span[0]) / width)));
  view.setAttribute("x", Math.min(a, b).toFixed(1));
  view.setAttribute("width", Math.max(2, Math.abs(b - a)).toFixed(1));
}

export function initMinimap() {
  if (!minimap) return;
  minimap.addEventListener("click", (ev) => {  // centre the view's time window where the minimap was clicked
    const layout = graph._fullLayout;
    if (!layout || !span) return;
    const box = minimap.getBoundingClientRect();
    const t = span[0] + (span[1] - span[0]) * (ev.clientX - box.left) / box.width;
    const [a, b] = layout.xaxis.range, half = Math.abs(b - a) / 2;
    Plotly.relayout(graph, {"xaxis.range": [t - half, t + half]});
  });
}
