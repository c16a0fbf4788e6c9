// Lanes: grouping agents by role, expanding a role, folding an agent's spawn subtree onto its lane, and lane
// labels thinned so they never print over each other.

import {draw} from "./graph.js";
import {graph, state} from "./state.js";

const groupBox = document.getElementById("group-lanes");
const laneGroups = document.getElementById("lane-groups");
let grouping = "auto";
const expanded = new Set();
const folded = new Set();    // agents whose spawn subtrees show on their own lanes

function plotPx() {
  return {width: Math.max(100, Math.round(graph.clientWidth || 1200)), height: Math.max(100, Math.round(window.innerHeight * 0.6))};
}

export function laneParams() {
  const params = new URLSearchParams({group: grouping, ...plotPx()});
  expanded.forEach((role) => params.append("expand", role));
  folded.forEach((agent) => params.append("collapse", agent));
  return params;
}

// Lane labels never print over each other: as figure.py does for the whole trace, label every n-th lane of
// those in view, n chosen so labels are at least `label_px` apart; zooming in brings the others back.
export function thinLaneLabels() {
  const axis = graph._fullLayout && graph._fullLayout.yaxis;
  const labels = state.payload && state.payload.lane_labels;
  if (!axis || !labels || !labels.length) return;
  const [a, b] = axis.range;
  const first = Math.max(0, Math.ceil(Math.min(a, b))), last = Math.min(labels.length - 1, Math.floor(Math.max(a, b)));
  const step = Math.max(1, Math.ceil(Math.max(1, last - first + 1) * state.payload.label_px / Math.max(axis._length, 1)));
  const values = [];
  for (let lane = Math.ceil(first / step) * step; lane <= last; lane += step) values.push(lane);
  Plotly.relayout(graph, {"yaxis.tickvals": values, "yaxis.ticktext": values.map((lane) => labels[lane])});
}

export function renderLaneControls() {
  groupBox.checked = state.payload.grouped;
  laneGroups.replaceChildren();
  state.payload.lanes.forEach((lane) => {
    if (!lane.group || lane.agents < 2) return;
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "expand " + lane.role + " (" + lane.agents + ")";
    button.addEventListener("click", () => { expanded.add(lane.role); grouping = "role"; draw(lane.role); });
    laneGroups.appendChild(button);
  });
  folded.forEach((agent) => {
    const button = document.createElement("button");
    button.type = "button";
    button.setAttribute("aria-pressed", "true");
    button.textContent = "unfold " + agent;
    button.addEventListener("click", () => fold(agent));
    laneGroups.appendChild(button);
  });
  document.querySelectorAll("button[data-fold]").forEach((b) => {
    const on = folded.has(b.dataset.fold);
    b.setAttribute("aria-pressed", String(on));
    b.textContent = on ? "unfold on graph" : "fold on graph";
  });
  expanded.forEach((role) => {
    const button = document.createElement("button");
    button.type = "button";
    button.setAttribute("aria-pressed", "true");
    button.textContent = "collapse " + role;
    button.addEventListener("click", () => { expanded.delete(role); draw(); });
    laneGroups.appendChild(button);
  });
}

// Fold (or unfold) an agent's spawn subtree onto its lane: from the spawn-tree panel or the lane controls.
function fold(agent) {
  folded.has(agent) ? folded.delete(agent) : folded.add(agent);
  draw();
}

export function initLanes() {
  document.addEventListener("click", (ev) => {
    const button = ev.target.closest("button[data-fold]");
    if (!button) return;
    ev.preventDefault();  // a button inside <summary>: fold, do not open or close the branch
    fold(button.dataset.fold);
  });
  groupBox.addEventListener("change", () => {
    grouping = groupBox.checked ? "role" : "agent";
    expanded.clear();
    draw();
  });
}
