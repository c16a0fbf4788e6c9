// The graph's legend in one row above the plot: a toggle per edge type (kept in the URL) and, folded in a
// popover, what the marks mean. Plotly's own legend took five rows over a binned trace.

import {graph, saveView, view} from "./state.js";

const row = document.getElementById("edge-toggles");
const marks = document.getElementById("legend-marks");
const seen = new Map();  // edge type -> its colour, for every edge type drawn so far
const DEFAULT_HIDDEN = "temporal";  // every edge follows its agent's previous event: shown on request

export function edgeShown(type) {
  return view.edges ? view.edges.has(type) : type !== DEFAULT_HIDDEN;
}

// Edge traces take the toggles' visibility as they are composed.
export function applyEdgeToggles(data) {
  data.forEach((trace) => {
    if (!trace.meta || trace.meta.kind !== "edge") return;
    if (!seen.has(trace.meta.edge_type)) seen.set(trace.meta.edge_type, trace.line.color);
    trace.visible = edgeShown(trace.meta.edge_type);
  });
}

export function renderLegend(lod) {
  if (!row) return;
  row.replaceChildren(...[...seen.keys()].map((type) => {
    const label = document.createElement("label"), box = document.createElement("input"), swatch = document.createElement("i");
    label.className = "edge-toggle";
    box.type = "checkbox";
    box.dataset.edge = type;
    box.checked = edgeShown(type);
    swatch.style.borderColor = seen.get(type);
    label.append(box, swatch, type.replace("_", " "));
    label.title = (box.checked ? "hide " : "show ") + type + " edges";
    return label;
  }));
  const items = graph.data.filter((t) => t.meta && (t.meta.kind === "events" || t.meta.kind === "bins") && t.marker)
    .map((t) => [t.name, t.marker.color, t.marker.symbol]);
  const list = document.createElement("ul");
  const seenNames = new Set();
  items.forEach(([name, colour, symbol]) => {
    if (seenNames.has(name) || typeof colour !== "string") return;
    seenNames.add(name);
    const item = document.createElement("li"), dot = document.createElement("span");
    dot.className = "mark " + (symbol || "circle").split("-")[0];
    dot.style.color = colour;
    item.append(dot, name);
    list.appendChild(item);
  });
  const notes = document.createElement("p");
  notes.className = "muted small";
  notes.textContent = lod
    ? "Binned: a mark is the events of a lane (or band of lanes) in a time bucket, its area by their number, its "
      + "colour the most common type; click one to zoom to it. An edge line bundles edges between two rows: the "
      + "wider and darker, the more edges (1, up to 10, up to 100, more). Grey bars: agent lifetimes; hover a role's "
      + "label (or its band, away from marks) for its agents, events and active time."
    : "Each mark is an event; lines are edges; grey bars are agent lifetimes.";
  marks.replaceChildren(list, notes);
}

export function initLegend(restyle) {
  if (!row) return;
  row.addEventListener("change", (ev) => {
    const box = ev.target.closest("input[data-edge]");
    if (!box) return;
    const shown = new Set([...seen.keys()].filter(edgeShown));
    box.checked ? shown.add(box.dataset.edge) : shown.delete(box.dataset.edge);
    view.edges = shown;
    box.parentElement.title = (box.checked ? "hide " : "show ") + box.dataset.edge + " edges";
    saveView();
    restyle();
  });
}
