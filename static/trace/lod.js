// Level of detail: a large trace opens as bins, and each zoom or pan asks the server for the window in view,
// exact events once they are few enough, bins otherwise; an event not drawn yet is located on the server.

import {applyOverlay, compose, highlight, PLOT_CONFIG, showFindings, showPath} from "./graph.js";
import {laneParams} from "./lanes.js";
import {api, graph, learnEvents, overlaySelect, state, status} from "./state.js";

let refineTimer = null, refineAsked = 0;
const located = new Map();  // event id -> [t, lane owner] learnt from /locate (its lane depends on the layout)

export function windowNote() {
  const windowAnswer = state.windowAnswer;
  if (!windowAnswer) return "";
  return windowAnswer.mode === "exact" ? windowAnswer.count.toLocaleString() + " in view, each drawn"
                                       : windowAnswer.count.toLocaleString() + " in view, binned (zoom in for events)";
}

// Once the relayouts of this task are done. Plotly already holds a scroll-zoom's relayout until the wheel
// pauses (50 ms), and an answer overtaken by a newer zoom is dropped, so no longer wait is needed.
export function refineSoon() {
  clearTimeout(refineTimer);
  const asked = performance.now();
  refineTimer = setTimeout(() => refine(asked), 0);
}

// Ask for the window in view and draw it; an answer overtaken by a newer zoom is dropped. The status line
// gives the time from the zoom to the painted frame.
async function refine(asked) {
  const layout = graph._fullLayout;
  if (!layout || !state.payload) return;
  const mine = ++refineAsked;
  const [x0, x1] = layout.xaxis.range, [ya, yb] = layout.yaxis.range;
  const params = laneParams();
  params.set("t0", Math.min(x0, x1)); params.set("t1", Math.max(x0, x1));
  params.set("lane0", Math.max(0, Math.min(ya, yb))); params.set("lane1", Math.max(ya, yb));
  if (overlaySelect.value) params.set("channel", overlaySelect.value);
  const response = await fetch(api + "/window?" + params);
  if (mine !== refineAsked) return;
  if (!response.ok) { status.textContent = state.summary + " · could not load the window (" + response.status + ")"; return; }
  state.windowAnswer = await response.json();
  if (mine !== refineAsked) return;
  if (state.windowAnswer.mode === "exact") {
    const e = state.windowAnswer.events;
    learnEvents(e.id, e.seq, e.x, e.y);
  }
  await Plotly.react(graph, compose(), graph.layout, PLOT_CONFIG);
  if (overlaySelect.value && state.windowAnswer.mode === "exact") await applyOverlay(overlaySelect.value, true);
  showPath();
  showFindings();
  if (graph.dataset.selected) {
    // still binned around an event being brought into view: narrow again (the window's count shrinks fast)
    const again = state.focusing === graph.dataset.selected && state.windowAnswer.mode !== "exact";
    if (!again) state.focusing = null;
    highlight(graph.dataset.selected, again);
  }
  await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  graph.dataset.windowMode = state.windowAnswer.mode;
  graph.dataset.edgeBudget = state.windowAnswer.edge_budget || "";  // bins: the most edge lines drawn
  graph.dataset.windowMs = Math.round(performance.now() - asked);
  status.textContent = state.summary + " · " + windowNote() + " · detail in "
    + ((performance.now() - asked) / 1000).toFixed(2) + " s";
  graph.dispatchEvent(new CustomEvent("window-drawn"));
}

// In LOD mode an event not drawn yet is found on the server and the view moves to a window around it
// narrow enough to draw its events one by one.
export async function locate(ids) {
  const wanted = ids.filter((id) => !state.seqOf.has(id)).slice(0, 1000);
  if (!wanted.length) return;
  const params = new URLSearchParams();
  wanted.forEach((id) => params.append("event", id));
  const response = await fetch(api + "/locate?" + params);
  if (!response.ok) return;
  (await response.json()).items.forEach((item) => { located.set(item.event_id, [item.t, item.lane_owner]); });
}

// Where an event is drawn now: undefined when not known yet, or when a focus leaves its lane out.
export function whereIs(eventId) {
  const seq = state.seqOf.get(eventId);
  if (seq !== undefined) return state.posOf.get(seq);
  const at = located.get(eventId), lane = at && state.payload.lane_of[at[1]];
  return lane === undefined ? undefined : [at[0], lane];
}
