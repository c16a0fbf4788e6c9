// Lanes: grouping agents by role, expanding a role, folding an agent's spawn subtree onto its lane, narrowing the
// graph to one agent's subtree or partners, showing a found agent's own lane, lane labels thinned so they never
// print over each other, and a scrollbar over the lanes when only some of them are in view.

import {draw} from "./graph.js";
import {graph, saveView, state, view} from "./state.js";

const groupBox = document.getElementById("group-lanes");
const laneGroups = document.getElementById("lane-groups");
const focusBar = document.getElementById("agent-focus");
const scroller = document.getElementById("lane-scroll");
export const LANE_FIT_PX = 18;  // a lane's least height when a view is fitted to lanes: each one labelled

function plotPx() {
  return {width: Math.max(100, Math.round(graph.clientWidth || 1200)), height: Math.max(100, Math.round(window.innerHeight * 0.6))};
}

export function laneParams() {
  const params = new URLSearchParams({group: view.grouping, ...plotPx()});
  view.expanded.forEach((role) => params.append("expand", role));
  view.folded.forEach((agent) => params.append("collapse", agent));
  if (view.focus) { params.set("focus", view.focus.agent); params.set("show", view.focus.show); }
  return params;
}

// How many lanes a plot of this layout shows with every lane labelled.
export function legibleLanes(layout) {
  const lanesPx = (layout.height - layout.margin.t - layout.margin.b) * (layout.yaxis.domain[1] - layout.yaxis.domain[0]);
  return Math.max(3, Math.floor(lanesPx / LANE_FIT_PX));
}

// Lane labels never print over each other: as figure.py does for the whole trace, label every n-th lane of
// those in `range`, n chosen so labels are at least `label_px` apart in `px` pixels; zooming in brings the others
// back. A found agent's lane is always labelled, in bold.
export function laneTicks(range, px) {
  const labels = state.payload.lane_labels;
  const [a, b] = range;
  const first = Math.max(0, Math.ceil(Math.min(a, b))), last = Math.min(labels.length - 1, Math.floor(Math.max(a, b)));
  const step = Math.max(1, Math.ceil(Math.max(1, last - first + 1) * state.payload.label_px / Math.max(px, 1)));
  const found = foundLane();
  const values = [];
  for (let lane = Math.ceil(first / step) * step; lane <= last; lane += step) {
    if (found === null || Math.abs(lane - found) >= step) values.push(lane);
  }
  if (found !== null && found >= first && found <= last) values.push(found);
  values.sort((x, y) => x - y);
  return {tickvals: values, ticktext: values.map((lane) => (lane === found ? "<b>" + labels[lane] + "</b>" : labels[lane]))};
}

export function thinLaneLabels() {
  const axis = graph._fullLayout && graph._fullLayout.yaxis;
  if (!axis || !state.payload || !state.payload.lane_labels.length) return;
  const ticks = laneTicks(axis.range, axis._length);
  Plotly.relayout(graph, {"yaxis.tickvals": ticks.tickvals, "yaxis.ticktext": ticks.ticktext});
  syncLaneScroll();
}

// The lanes a view fitted to `lanes` (first, last) shows: as many from the first as are each labelled.
export function fitRange(first, last, layout) {
  return [Math.min(last, first + legibleLanes(layout) - 1) + 0.5, first - 0.5];
}

// The lanes around `lane`, as many as are each labelled.
export function rangeAround(lane, layout) {
  const n = state.payload.lanes.length, k = legibleLanes(layout);
  if (n <= k) return [n - 0.5, -0.5];
  const lo = Math.max(-0.5, Math.min(n - k - 0.5, lane - k / 2));
  return [lo + k, lo];
}

// A grouped role's label tells, hovered, what its band does (figure.py _role_bands): its agents, their events
// and when they were active. The band's own hover shows only where no bin is nearer the pointer.
export function labelRoleBands() {
  const bands = new Map();
  graph.data.forEach((t) => { if (t.meta && t.meta.kind === "role") bands.set(t.meta.lane, t.text); });
  graph.querySelectorAll(".yaxislayer-above .ytick").forEach((tick) => {
    const text = tick.querySelector("text"), band = tick.__data__ && bands.get(tick.__data__.x);
    if (!text || !band) return;
    let title = text.querySelector("title");
    if (!title) { title = document.createElementNS("http://www.w3.org/2000/svg", "title"); text.appendChild(title); }
    // the band's label is escaped HTML made by the server with <b> and <br> only: back to plain text
    title.textContent = band.replace(/<br>/g, "\n").replace(/<\/?b>/g, "").replace(/&lt;/g, "<").replace(/&gt;/g, ">")
      .replace(/&amp;/g, "&");
    text.style.pointerEvents = "all";
    text.style.cursor = "help";
  });
}

// The lane of the agent find showed, when it has one of its own now.
export function foundLane() {
  if (!view.found || !state.payload || !state.payload.lane_of) return null;
  const lane = state.payload.lane_of[view.found];
  return lane !== undefined && state.payload.lanes[lane].agent === view.found ? lane : null;
}

// The found agent's lane as a band across the plot (a layout shape, under the marks).
export function laneMarks() {
  const lane = foundLane();
  return lane === null ? [] : [{type: "rect", xref: "paper", x0: 0, x1: 1, yref: "y", y0: lane - 0.5, y1: lane + 0.5,
                                fillcolor: "rgba(250,204,21,0.28)", line: {width: 0}, layer: "below"}];
}

// The scrollbar over the lanes: shown when only some lanes are in view; scrolling it moves the view's lanes,
// and a zoom or pan of the plot moves it.
export function syncLaneScroll() {
  const layout = graph._fullLayout, n = state.payload ? state.payload.lanes.length : 0;
  if (!scroller || !layout || !layout.yaxis || !n) return;
  const axis = layout.yaxis, [a, b] = axis.range, lo = Math.min(a, b), shown = Math.abs(b - a);
  if (shown >= n - 0.01) { scroller.hidden = true; return; }
  scroller.hidden = false;
  const box = graph.getBoundingClientRect(), card = scroller.offsetParent.getBoundingClientRect();
  scroller.style.top = (box.top - card.top + axis._offset) + "px";
  scroller.style.height = axis._length + "px";
  scroller.style.left = (box.left - card.left + layout.xaxis._offset + layout.xaxis._length + 4) + "px";
  scroller.firstElementChild.style.height = (axis._length * n / shown) + "px";
  scroller.scrollTop = (lo + 0.5) / n * scroller.firstElementChild.offsetHeight;
  scroller.setAttribute("aria-valuetext", "lanes " + Math.max(1, Math.round(lo + 1.5)) + "–"
                        + Math.min(n, Math.round(lo + shown)) + " of " + n);
}

function scrollLanes() {
  const axis = graph._fullLayout && graph._fullLayout.yaxis, n = state.payload ? state.payload.lanes.length : 0;
  if (!axis || !n) return;
  const [a, b] = axis.range, shown = Math.abs(b - a);
  const lo = scroller.scrollTop / scroller.firstElementChild.offsetHeight * n - 0.5;
  if (Math.abs(lo - Math.min(a, b)) < 0.05) return;  // the plot moved the bar: nothing to follow
  Plotly.relayout(graph, {"yaxis.range": [lo + shown, lo]});
}

export function renderLaneControls() {
  groupBox.checked = state.payload.grouped;
  laneGroups.replaceChildren();
  state.payload.lanes.forEach((lane) => {
    if (!lane.group || lane.agents < 2) return;
    laneGroups.appendChild(laneButton("expand " + lane.role + " (" + lane.agents + ")", false, () => {
      view.expanded.add(lane.role); view.grouping = "role"; draw({fitRole: lane.role});
    }));
  });
  view.folded.forEach((agent) => laneGroups.appendChild(laneButton("unfold " + agent, true, () => fold(agent))));
  document.querySelectorAll("button[data-fold]").forEach((b) => {
    const on = view.folded.has(b.dataset.fold);
    b.setAttribute("aria-pressed", String(on));
    b.textContent = on ? "unfold on graph" : "fold on graph";
  });
  view.expanded.forEach((role) => laneGroups.appendChild(laneButton("collapse " + role, true, () => {
    view.expanded.delete(role); draw();
  })));
  renderFocusBar();
}

function laneButton(text, pressed, act) {
  const button = document.createElement("button");
  button.type = "button";
  if (pressed) button.setAttribute("aria-pressed", "true");
  button.textContent = text;
  button.addEventListener("click", act);
  return button;
}

// From an agent (the one find showed, or the focus): narrow the graph to its subtree or to who it talks to.
function renderFocusBar() {
  const agent = view.focus ? view.focus.agent : view.found;
  focusBar.hidden = !agent;
  if (!agent) return;
  const name = document.createElement("strong");
  name.textContent = agent;
  name.title = agent;
  const choices = [["subtree", "show its subtree", "only the lanes of this agent and the agents it spawned"],
                   ["talks", "show who it talks to", "only the lanes of this agent and the agents it has edges with"]];
  const buttons = choices.map(([show, text, title]) => {
    const on = Boolean(view.focus && view.focus.agent === agent && view.focus.show === show);
    const button = laneButton(text, on, () => focusOn(on ? null : {agent, show}));
    button.dataset.show = show;
    button.title = title;
    return button;
  });
  const all = laneButton("all lanes", false, () => focusOn(null));
  all.hidden = !view.focus;
  focusBar.replaceChildren(name, ...buttons, all);
}

async function focusOn(focus) {
  view.focus = focus;
  view.expanded.clear();
  view.grouping = "auto";  // a focus's few lanes are each an agent's
  await draw({fitAll: true});
}

// Find and follow: expand what hides an agent (its role's group, a folded ancestor, a focus without it),
// then bring its own lane into view among lanes that are each labelled, and mark it.
export async function showAgent(agent) {
  view.found = agent;
  let drawn = false;
  for (let tries = 0; tries < 12; tries++) {
    const lane = state.payload.lane_of[agent];
    if (lane === undefined) {  // a focus leaves it out
      if (!view.focus) break;
      view.focus = null;
    } else {
      const info = state.payload.lanes[lane];
      if (info.agent === agent) break;
      if (info.group) { view.expanded.add(info.role); view.grouping = "role"; }
      else if (view.folded.has(info.agent)) view.folded.delete(info.agent);
      else break;
    }
    await draw({fitAgent: agent});
    drawn = true;
  }
  if (!drawn) await draw({fitAgent: agent});
}

// Fold (or unfold) an agent's spawn subtree onto its lane: from the spawn-tree panel or the lane controls.
function fold(agent) {
  view.folded.has(agent) ? view.folded.delete(agent) : view.folded.add(agent);
  draw();
}

export function initLanes() {
  document.addEventListener("click", (ev) => {
    const button = ev.target.closest("button[data-fold], button[data-focus]");
    if (!button) return;
    ev.preventDefault();  // a button inside <summary>: fold or focus, do not open or close the branch
    if (button.dataset.fold) { fold(button.dataset.fold); return; }
    view.found = button.dataset.focus;
    graph.closest(".workspace").scrollIntoView({block: "start"});
    focusOn({agent: button.dataset.focus, show: "subtree"});
  });
  groupBox.addEventListener("change", () => {
    view.grouping = groupBox.checked ? "role" : "agent";
    view.expanded.clear();
    draw();
  });
  if (scroller) scroller.addEventListener("scroll", scrollLanes);
  // after plotly's own responsive resize, which sizes the plot area the scrollbar sits beside
  let resized = null;
  window.addEventListener("resize", () => { clearTimeout(resized); resized = setTimeout(syncLaneScroll, 300); });
  saveView();
}
