// The interaction graph: draws the figure (and in LOD mode the window in view), marks the selected event and
// keeps it in view, recolours markers by an overlay channel, and marks the critical path and audit findings.

import {applyEdgeToggles, edgeShown, initLegend, renderLegend} from "./legend.js";
import {fitRange, foundLane, labelRoleBands, laneMarks, laneParams, laneTicks, rangeAround, renderLaneControls,
        syncLaneScroll, thinLaneLabels} from "./lanes.js";
import {locate, refineSoon, whereIs, windowNote} from "./lod.js";
import {drawMinimap, showWindowOnMinimap} from "./minimap.js";
import {api, graph, learnEvents, overlaySelect, panel, saveView, state, status, traceId, view} from "./state.js";
import {bringWorkspaceIntoView, selectEvent} from "./workspace.js";

const overlaySize = document.getElementById("overlay-size");
const DIVERGING = [[0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f7f7f7"], [0.75, "#67a9cf"], [1, "#2166ac"]];
const NO_VALUE = "#c7ccd4";
export const PLOT_CONFIG = {responsive: true, displaylogo: false, scrollZoom: true, modeBarButtonsToRemove: ["select2d", "lasso2d"],
                            toImageButtonOptions: {filename: traceId + "-graph"}};  // the camera: "Download plot as a png"
// The plot is never taller than the window less this (the toolbar and legend row above it): its top and its
// time axis are seen together; more lanes than fit, each labelled, are scrolled (lanes.js).
const WINDOW_LEFT_PX = 150;
const MIN_PLOT_PX = 420;
let hoverOf = new Map();     // seq -> hover text (already escaped by the server)
let eventTraces = [];        // indices of the per-type marker traces
let overlayIdx = -1, greyIdx = -1, selectedIdx = -1, pathIdx = -1, findingsIdx = -1;
// Whether the critical path and the findings are drawn now: a restyle redraws every trace, so hiding what is
// already hidden (each first draw and window) is skipped.
const shown = {path: false, findings: false};
let firstDraw = true;
let uiRevision = null, fits = 0;  // Plotly's uirevision once a draw has fitted an expanded role (see draw)
let activeFinding = null;    // the audit finding whose events are marked, when one was clicked

function esc(text) {
  // Plotly decodes &lt; &gt; &amp; in labels but shows &quot; literally; quotes are inert without tags.
  return String(text).replace(/[&<>]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;"}[c]));
}

// The first figure is asked for as the page preloads it (the server's default plot size): no second request.
function figureUrl() {
  const params = laneParams();
  params.delete("width"); params.delete("height");
  return api + "/figure?" + params;
}

// The figure's own traces plus, in LOD mode, the window's; then the page's overlay and marking traces.
export function compose() {
  const data = state.payload.figure.data.map((trace) => (state.lod && trace.name === "agent lifetime" ? nearView(trace) : trace))
    .concat(state.lod && state.windowAnswer ? state.windowAnswer.traces : []);
  applyEdgeToggles(data);
  eventTraces = [];
  data.forEach((trace, i) => {
    if (trace.meta && trace.meta.kind === "events") {
      eventTraces.push(i);
      trace.customdata.forEach((seq, k) => { hoverOf.set(seq, trace.hovertext[k]); });
    }
  });
  overlayIdx = data.length;
  greyIdx = data.length + 1;
  selectedIdx = data.length + 2;
  pathIdx = data.length + 3;
  findingsIdx = data.length + 4;
  shown.path = shown.findings = false;
  data.push(
    {type: "scatter", mode: "markers", name: "overlay", x: [], y: [], visible: false, showlegend: false,
     hovertemplate: "%{hovertext}<extra></extra>", customdata: []},
    {type: "scatter", mode: "markers", name: "no value", x: [], y: [], visible: false,
     marker: {color: NO_VALUE, size: 7}, hovertemplate: "%{hovertext}<extra></extra>", customdata: []},
    {type: "scatter", mode: "markers", name: "selected", x: [], y: [], showlegend: false, hoverinfo: "skip",
     marker: {size: 20, color: "rgba(0,0,0,0)", line: {color: "#111827", width: 2.5}}},
    {type: "scatter", mode: "lines+markers", name: "critical path", x: [], y: [], visible: false, hoverinfo: "skip",
     line: {color: "rgba(234,88,12,0.85)", width: 3}, marker: {size: 11, color: "rgba(0,0,0,0)",
     line: {color: "rgba(234,88,12,0.95)", width: 2}}},
    {type: "scatter", mode: "markers", name: "audit findings", x: [], y: [], visible: false, hoverinfo: "skip",
     marker: {size: 16, color: "rgba(0,0,0,0)", line: {color: "#dc2626", width: 2}}});
  return data;
}

// In LOD mode, the agent lifetimes cut to a view's width either side of the view: after a deep zoom each
// lifetime is thousands of screens long, which the browser draws (and the next zoom redraws) at a cost.
function nearView(trace) {
  const layout = graph._fullLayout;
  if (!layout || !layout.xaxis || !layout.xaxis.range) return trace;
  const [a, b] = layout.xaxis.range, width = Math.abs(b - a), lo = Math.min(a, b) - width, hi = Math.max(a, b) + width;
  const x = [], y = [];
  for (let i = 0; i + 1 < trace.x.length; i += 3) {  // segments [x0, x1, null]
    if (trace.x[i + 1] < lo || trace.x[i] > hi) continue;
    x.push(Math.max(trace.x[i], lo), Math.min(trace.x[i + 1], hi), null);
    y.push(trace.y[i], trace.y[i + 1], null);
  }
  return {...trace, x, y};
}

// The lanes a draw's view fits: a role just expanded (its first lanes, each labelled), a found agent's lane
// (with its neighbours), or every lane (a focus just chosen); null: the reader's view is kept.
function fittedRange(fit, layout) {
  const lanes = state.payload.lanes;
  if (fit.fitRole) {
    const fitted = lanes.map((lane, i) => (lane.role === fit.fitRole && !lane.group ? i : -1)).filter((i) => i >= 0);
    return fitted.length ? fitRange(fitted[0], fitted[fitted.length - 1], layout) : null;
  }
  if (fit.fitAgent) {
    const lane = foundLane();
    return lane === null ? null : rangeAround(lane, layout);
  }
  return fit.fitAll ? [lanes.length - 0.5, -0.5] : null;
}

// `fit`: what the view then shows (fittedRange; `xRange`: a time span, else the whole time axis).
export async function draw(fit = {}) {
  status.textContent = "drawing…";
  const started = performance.now();
  const response = await fetch(figureUrl());
  if (!response.ok) {
    status.textContent = "could not load the graph (" + response.status + ")";
    document.body.dispatchEvent(new CustomEvent("graph-drawn"));  // the analysis panel does not wait for ever
    return;
  }
  state.payload = await response.json();
  state.lod = state.payload.mode === "bins";
  state.seqOf = new Map(); state.idOf = new Map(); state.posOf = new Map(); hoverOf = new Map();
  state.windowAnswer = state.lod ? {mode: state.payload.window_mode, traces: state.payload.traces, events: state.payload.events,
                                     count: state.payload.count, window: state.payload.window} : null;
  if (state.lod && state.windowAnswer.mode === "exact") {  // a focus on few lanes: their events, one by one
    const e = state.windowAnswer.events;
    learnEvents(e.id, e.seq, e.x, e.y);
  }
  if (!state.lod) learnEvents(state.payload.event_ids, state.payload.event_ids.map((_, seq) => seq), state.payload.positions.x, state.payload.positions.y);
  const layout = state.payload.figure.layout;
  const tall = layout.height;
  layout.height = Math.min(tall, Math.max(MIN_PLOT_PX, window.innerHeight - WINDOW_LEFT_PX));
  layout.shapes = laneMarks();
  const range = fittedRange(fit, layout);
  if (range) {
    // Fitted in the same draw (a relayout after it cost a second one): a new ui revision makes Plotly take
    // these ranges over the reader's zoom, which it otherwise keeps from draw to draw.
    uiRevision = layout.uirevision + "#fit" + (++fits);
    layout.xaxis.autorange = !fit.xRange;
    if (fit.xRange) layout.xaxis.range = fit.xRange;
    layout.yaxis.autorange = false;  // the range runs down, as "reversed" would
    layout.yaxis.range = range;
  }
  if (range || layout.height < tall || layout.shapes.length) {  // the server's labels were thinned for its height
    const lanesPx = (layout.height - layout.margin.t - layout.margin.b) * (layout.yaxis.domain[1] - layout.yaxis.domain[0]);
    Object.assign(layout.yaxis, laneTicks(range || [state.payload.lanes.length - 0.5, -0.5], lanesPx));
  }
  if (uiRevision) layout.uirevision = uiRevision;
  await Plotly.react(graph, compose(), layout, PLOT_CONFIG);
  if (range && state.lod) refineSoon();
  saveView();
  graph.removeAllListeners && graph.removeAllListeners("plotly_click");
  graph.removeAllListeners && graph.removeAllListeners("plotly_relayout");
  graph.removeAllListeners && graph.removeAllListeners("plotly_afterplot");
  labelRoleBands();
  graph.on("plotly_afterplot", labelRoleBands);
  drawMinimap();
  graph.on("plotly_relayout", (ev) => {
    if (Object.keys(ev).some((key) => key.startsWith("xaxis.range") || key === "xaxis.autorange")) showWindowOnMinimap();
    if (Object.keys(ev).some((key) => key.startsWith("yaxis.range") || key === "yaxis.autorange")) thinLaneLabels();
    else if (Object.keys(ev).some((key) => key.startsWith("xaxis.range") || key === "xaxis.autorange")) syncLaneScroll();
    if (state.lod && Object.keys(ev).some((key) => key.startsWith("xaxis.range") || key.startsWith("yaxis.range")
                                           || key === "xaxis.autorange" || key === "yaxis.autorange")) refineSoon();
  });
  graph.on("plotly_click", (ev) => {
    const point = ev.points && ev.points[0];
    if (point && point.data.meta && point.data.meta.kind === "bins") { zoomToBin(nearestBin(ev.event, point.customdata)); return; }
    if (!point || point.customdata === undefined || point.data.mode !== "markers" || !state.idOf.has(point.customdata)) return;
    selectEvent(state.idOf.get(nearestEvent(ev.event, point.customdata)));
  });
  renderLaneControls();
  renderLegend(state.lod);
  syncLaneScroll();
  if (overlaySelect.value) await applyOverlay(overlaySelect.value);
  showPath();
  showFindings();
  const selected = graph.dataset.selected;
  if (selected) { highlight(selected, true); bringWorkspaceIntoView(); }
  // Honest timing: the frame after the next animation frame is painted; performance.now() counts from
  // navigation start, so the first draw reports what the reader waited for (benchmarks/render.py checks it
  // from outside the page). A redraw (lane grouping) reports its own time.
  await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  const painted = performance.now();
  // the analysis panel loads after the graph is painted: its swap and charts would otherwise delay the frame
  document.body.dispatchEvent(new CustomEvent("graph-drawn"));
  const timing = firstDraw ? "painted " + (painted / 1000).toFixed(2) + " s after navigation"
                           : "redrawn in " + ((painted - started) / 1000).toFixed(2) + " s";
  firstDraw = false;
  graph.dataset.drawnMs = Math.round(painted);  // since navigation start
  graph.dataset.edgeBudget = (state.lod && state.payload.edge_budget) || "";
  graph.dataset.drawn = "true";
  // Lanes, not agents: a lane may be a tool, the user or a group of agents (the header counts agents).
  state.summary = (state.lod ? state.payload.n_events : state.payload.event_ids.length).toLocaleString() + " events · "
    + state.payload.lanes.length + " lanes";
  status.textContent = state.summary + " · " + timing + (state.lod ? " · " + windowNote() : "");
}

// A click on a bin zooms to its time bucket and its lanes; a bin of a role's group lane expands the role first.
function zoomToBin(data) {
  const [, , , , first, last, t0, t1] = data;
  const lane = state.payload.lanes[first];
  if (first === last && lane.group && lane.agents > 1) {
    view.expanded.add(lane.role);
    view.grouping = "role";
    draw({fitRole: lane.role, xRange: [t0, t1]});
    return;
  }
  Plotly.relayout(graph, {"xaxis.range": [t0, t1], "yaxis.range": [last + 0.5, first - 0.5]});
}

// The bin whose mark's centre is nearest the pointer (`data`, Plotly's pick, without one): marks of adjacent
// bins overlap, and Plotly picks the one drawn on top.
function nearestBin(pointer, data) {
  const layout = graph._fullLayout;
  if (!pointer || !layout) return data;
  const xa = layout.xaxis, ya = layout.yaxis, box = graph.getBoundingClientRect();
  const px = pointer.clientX - box.left - xa._offset, py = pointer.clientY - box.top - ya._offset;
  let best = data, least = Infinity;
  graph.data.forEach((trace) => {
    if (!trace.meta || trace.meta.kind !== "bins" || trace.visible === false) return;
    trace.customdata.forEach((c, k) => {
      const dx = xa.l2p(trace.x[k]) - px, dy = ya.l2p(trace.y[k]) - py;
      if (dx * dx + dy * dy < least) { least = dx * dx + dy * dy; best = c; }
    });
  });
  return best;
}

// Edge toggles (legend.js) show or hide the edge traces drawn now.
function restyleEdges() {
  const indices = [], visible = [];
  graph.data.forEach((trace, i) => {
    if (trace.meta && trace.meta.kind === "edge") { indices.push(i); visible.push(edgeShown(trace.meta.edge_type)); }
  });
  if (indices.length) Plotly.restyle(graph, {visible}, indices);
}

// The event whose marker centre is nearest the pointer (`seq`, the one Plotly picked, when there is no pointer):
// where markers overlap, Plotly's SVG hover picks the one drawn on top, not the one clicked at.
function nearestEvent(pointer, seq) {
  const layout = graph._fullLayout;
  if (!pointer || !layout) return seq;
  const xa = layout.xaxis, ya = layout.yaxis, box = graph.getBoundingClientRect();
  const px = pointer.clientX - box.left - xa._offset, py = pointer.clientY - box.top - ya._offset;
  let best = seq, least = Infinity;
  graph.data.forEach((trace) => {
    if (trace.mode !== "markers" || trace.visible === false || trace.visible === "legendonly") return;
    (trace.customdata || []).forEach((s, k) => {
      if (!state.idOf.has(s)) return;
      const dx = xa.l2p(trace.x[k]) - px, dy = ya.l2p(trace.y[k]) - py;
      if (dx * dx + dy * dy < least) { least = dx * dx + dy * dy; best = s; }
    });
  });
  return best;
}

// The share of the plot's width a drawer leaves uncovered (all of it when the panel sits beside the graph).
function uncoveredShare() {
  if (!panel.classList.contains("open") || !window.matchMedia("(max-width: 1279px)").matches) return 1;
  const plot = graph.getBoundingClientRect(), drawer = panel.getBoundingClientRect();
  return Math.max(0.3, Math.min(1, (drawer.left - plot.left) / plot.width));
}

export async function highlight(eventId, intoView) {
  if (!state.payload) return;
  if (state.lod && !whereIs(eventId)) await locate([eventId]);
  const at = whereIs(eventId);
  if (!at) return;
  const [x, y] = at;
  Plotly.restyle(graph, {x: [[x]], y: [[y]]}, [selectedIdx]);
  const layout = graph._fullLayout;
  if (intoView && layout) {
    const [x0, x1] = layout.xaxis.range;
    const [ya, yb] = layout.yaxis.range;
    const update = {};
    let lo = Math.min(x0, x1), span = Math.abs(x1 - x0);
    if (state.lod && state.windowAnswer && state.windowAnswer.mode !== "exact") {
      // narrow the view until the window around the event is drawn event by event
      state.focusing = eventId;
      span = Math.max(span * Math.min(0.5, 2000 / Math.max(state.windowAnswer.count, 1)), 1e-9);
      lo = x - span * uncoveredShare() / 3;
      update["xaxis.range"] = [lo, lo + span];
    }
    const visibleHi = lo + span * uncoveredShare();
    if (x < lo || x > visibleHi) {  // bring it back to a third of the way across what is uncovered
      const start = x - span * uncoveredShare() / 3;
      update["xaxis.range"] = [start, start + span];
    }
    if (y < Math.min(ya, yb) || y > Math.max(ya, yb)) {
      const half = Math.abs(yb - ya) / 2;
      update["yaxis.range"] = [y + half, y - half];
    }
    if (Object.keys(update).length) Plotly.relayout(graph, update);
  }
}

// In LOD mode the server colours bins itself; exact windows come with the channel's values.
export async function applyOverlay(channel, fromWindow) {
  if (!state.payload) return;
  if (!channel) {
    Plotly.restyle(graph, {visible: true}, eventTraces);
    Plotly.restyle(graph, {visible: false}, [overlayIdx, greyIdx]);
    delete graph.dataset.overlay;
    if (state.lod && !fromWindow) refineSoon();
    return;
  }
  let seqs, values;
  if (state.lod) {
    if (!state.windowAnswer || state.windowAnswer.mode !== "exact" || !state.windowAnswer.events.values) {
      graph.dataset.overlay = channel;
      if (!fromWindow) refineSoon();  // the window comes back coloured (bins) or with the values (events)
      return;
    }
    seqs = state.windowAnswer.events.seq;
    values = state.windowAnswer.events.values;
  } else {
    const response = await fetch(api + "/overlay?channel=" + encodeURIComponent(channel));
    if (!response.ok) { status.textContent = "no overlay " + channel; return; }
    values = (await response.json()).values;
    seqs = values.map((_, seq) => seq);
  }
  const on = {x: [], y: [], c: [], text: [], seq: []}, off = {x: [], y: [], text: [], seq: []};
  let maxAbs = 0;
  values.forEach((v) => { if (v !== null && Math.abs(v) > maxAbs) maxAbs = Math.abs(v); });
  maxAbs = maxAbs || 1;
  values.forEach((v, k) => {
    const seq = seqs[k], [x, y] = state.posOf.get(seq);
    if (v === null) {
      off.x.push(x); off.y.push(y); off.text.push(hoverOf.get(seq)); off.seq.push(seq);
    } else {
      on.x.push(x); on.y.push(y); on.c.push(v); on.seq.push(seq);
      on.text.push(hoverOf.get(seq) + "<br><b>" + esc(channel) + ": " + v + "</b>");
    }
  });
  const sizes = overlaySize.checked ? on.c.map((v) => 5 + 13 * Math.abs(v) / maxAbs) : 9;
  Plotly.restyle(graph, {visible: false}, eventTraces);
  Plotly.restyle(graph, {
    x: [on.x, off.x], y: [on.y, off.y], hovertext: [on.text, off.text], customdata: [on.seq, off.seq],
    visible: [true, true], name: [esc(channel), "no value"],
    marker: [{color: on.c, colorscale: DIVERGING, cmin: -maxAbs, cmax: maxAbs, cmid: 0, size: sizes,
              colorbar: {title: {text: esc(channel)}, thickness: 12, len: 0.6, y: 0.6},
              line: {width: 0.5, color: "rgba(0,0,0,0.35)"}},
             {color: NO_VALUE, size: 6}],
  }, [overlayIdx, greyIdx]);
  graph.dataset.overlay = channel;
}

// Critical path and audit findings from the analysis panel (loaded after the page) mark the graph.
async function positionsOf(ids) {
  if (state.lod) await locate(ids);
  const xs = [], ys = [];
  ids.forEach((id) => {
    const at = whereIs(id);
    if (at) { xs.push(at[0]); ys.push(at[1]); }
  });
  return {xs, ys};
}

export async function showPath() {
  const box = document.getElementById("show-critical-path");
  if (!state.payload || pathIdx < 0) return;
  const on = Boolean(box && box.checked);
  if (!on && !shown.path) return;
  const {xs, ys} = on ? await positionsOf(JSON.parse(box.dataset.path)) : {xs: [], ys: []};
  shown.path = on;
  Plotly.restyle(graph, {x: [xs], y: [ys], visible: on}, [pathIdx]);
}

export async function showFindings() {
  const box = document.getElementById("show-findings");
  if (!state.payload || findingsIdx < 0) return;
  let ids = [];
  if (activeFinding) ids = JSON.parse(activeFinding.dataset.events);
  else if (box && box.checked) {
    document.querySelectorAll("#audit-findings button.finding").forEach((b) => { ids = ids.concat(JSON.parse(b.dataset.events)); });
  }
  if (!ids.length && !shown.findings) return;
  const {xs, ys} = await positionsOf(ids);
  shown.findings = xs.length > 0;
  Plotly.restyle(graph, {x: [xs], y: [ys], visible: shown.findings}, [findingsIdx]);
}

// A large trace's overlay channels are listed after its graph is drawn (the page does not wait for them).
async function listChannelsLater() {
  if (!overlaySelect.dataset.channelsLater) return;
  delete overlaySelect.dataset.channelsLater;
  const response = await fetch(api + "/overlays");
  if (!response.ok) return;
  const computed = overlaySelect.options[1] || null;
  (await response.json()).channels.forEach((channel) => {
    if ([...overlaySelect.options].some((o) => o.value === channel.name)) return;
    const option = document.createElement("option");
    option.value = channel.name;
    option.textContent = channel.name + " (" + channel.count + " events)";
    overlaySelect.insertBefore(option, computed);
  });
}

export function initGraph() {
  initLegend(restyleEdges);
  overlaySelect.addEventListener("change", () => applyOverlay(overlaySelect.value));
  overlaySize.addEventListener("change", () => applyOverlay(overlaySelect.value));
  document.addEventListener("change", (ev) => {
    if (ev.target.id === "show-critical-path") showPath();
    if (ev.target.id === "show-findings") { activeFinding = null; showFindings(); }
  });
  document.addEventListener("click", (ev) => {
    const button = ev.target.closest("#audit-findings button.finding");
    if (!button) return;
    document.querySelectorAll("#audit-findings button.finding.active").forEach((b) => b.classList.remove("active"));
    button.classList.add("active");
    activeFinding = button;
    showFindings();
    const ids = JSON.parse(button.dataset.events);
    if (ids.length) selectEvent(ids[0]);
  });
  document.body.addEventListener("graph-drawn", listChannelsLater, {once: true});
}
