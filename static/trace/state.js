// What the trace page's modules share: the elements several of them use, and the state of the graph drawn now.

export const graph = document.getElementById("graph");
export const traceId = graph ? graph.dataset.traceId : "";
export const api = "/api/traces/" + encodeURIComponent(traceId);
export const status = document.getElementById("graph-status");
export const overlaySelect = document.getElementById("overlay-select");
export const panel = document.getElementById("side-panel");

export const state = {
  payload: null,          // figure JSON from the server
  lod: false,             // the trace is drawn as bins, a window at a time
  seqOf: new Map(),       // event id -> position in the trace (in LOD mode: of the events drawn so far)
  idOf: new Map(),        // seq -> event id
  posOf: new Map(),       // seq -> [x, y]
  windowAnswer: null,     // LOD mode: the window drawn now (exact events or bins)
  summary: "",            // the status line's count of events and lanes
  focusing: null,         // LOD mode: the event a narrowing zoom is bringing into view
  timeOrder: null,        // seqs of the events drawn, in time order (made when j/k first need it)
};

// Remember where the events now drawn sit (all of them in exact mode; a window's in LOD mode).
export function learnEvents(ids, seqs, xs, ys) {
  ids.forEach((id, k) => {
    const seq = seqs[k];
    state.seqOf.set(id, seq); state.idOf.set(seq, id); state.posOf.set(seq, [xs[k], ys[k]]);
  });
  state.timeOrder = null;
}

// What the reader has chosen to see, kept in the page's URL (a reload or a shared link shows the same graph):
// lane grouping, expanded roles, folded subtrees, a focus on one agent's subtree or partners, the edge types shown.
const VIEW_KEYS = ["group", "expand", "collapse", "focus", "show", "edges"];
const query = new URLSearchParams(window.location.search);
export const view = {
  grouping: ["role", "agent"].includes(query.get("group")) ? query.get("group") : "auto",
  expanded: new Set(query.getAll("expand")),
  folded: new Set(query.getAll("collapse")),   // agents whose spawn subtrees show on their own lanes
  focus: query.get("focus") ? {agent: query.get("focus"), show: query.get("show") === "talks" ? "talks" : "subtree"} : null,
  edges: query.has("edges") ? new Set(query.get("edges").split(",").filter(Boolean)) : null,  // null: the default
  found: null,                                 // the agent find showed last: its lane is marked
};

export function viewParams() {
  const params = new URLSearchParams();
  if (view.grouping !== "auto") params.set("group", view.grouping);
  view.expanded.forEach((role) => params.append("expand", role));
  view.folded.forEach((agent) => params.append("collapse", agent));
  if (view.focus) { params.set("focus", view.focus.agent); params.set("show", view.focus.show); }
  if (view.edges) params.set("edges", [...view.edges].join(","));
  return params;
}

// The page's URL with the view as it is now, its other parameters (the selected event, a queue) kept.
export function pageUrl(changes = {}) {
  const params = new URLSearchParams(window.location.search);
  VIEW_KEYS.forEach((key) => params.delete(key));
  Object.entries(changes).forEach(([key, value]) => params.set(key, value));
  viewParams().forEach((value, key) => params.append(key, value));
  const text = params.toString();
  return window.location.pathname + (text ? "?" + text : "");
}

export function saveView() {
  history.replaceState(null, "", pageUrl() + window.location.hash);
}
