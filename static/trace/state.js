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
