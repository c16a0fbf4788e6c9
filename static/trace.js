// Trace page: draws the interaction graph, keeps graph, inspector, table and URL in sync, and recolours
// markers by an overlay channel. A trace of up to 5,000 events is drawn event by event once; a larger one opens
// as bins (level of detail) and each zoom or pan asks the server for its window: exact events once they are
// few enough, bins otherwise, so the browser never holds more marks than the plot has pixels.

// Delete control: a confirmation saying what is removed and that labels are kept, then the JSON API's
// DELETE (force=true keeps the labels); it carries the page's form token like every write from our pages.
(function () {
  "use strict";
  const dialog = document.getElementById("delete-trace");
  const opener = document.getElementById("delete-trace-button");
  if (!dialog || !opener) return;
  const confirm = document.getElementById("delete-trace-confirm");
  const error = document.getElementById("delete-trace-error");
  const traceId = dialog.dataset.traceId;
  opener.addEventListener("click", () => { error.hidden = true; dialog.showModal(); });
  confirm.addEventListener("click", async () => {
    confirm.disabled = true;
    const token = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRF-Token"] || "";
    let answer = null;
    try {
      const response = await fetch("/api/traces/" + encodeURIComponent(traceId) + "?force=true",
                                   {method: "DELETE", headers: {"X-CSRF-Token": token}});
      if (response.ok) { window.location.assign("/?deleted=" + encodeURIComponent(traceId)); return; }
      answer = (await response.json().catch(() => ({}))).error || "the server answered " + response.status;
    } catch (exc) {
      answer = "the server could not be reached";
    }
    error.textContent = "Not deleted: " + answer;
    error.hidden = false;
    confirm.disabled = false;
  });
})();

(function () {
  "use strict";
  const graph = document.getElementById("graph");
  if (!graph || !window.Plotly) return;
  const traceId = graph.dataset.traceId;
  const base = "/traces/" + encodeURIComponent(traceId);
  const api = "/api/traces/" + encodeURIComponent(traceId);
  const status = document.getElementById("graph-status");
  const overlaySelect = document.getElementById("overlay-select");
  const overlaySize = document.getElementById("overlay-size");
  const groupBox = document.getElementById("group-lanes");
  const laneGroups = document.getElementById("lane-groups");
  const queueId = new URLSearchParams(window.location.search).get("queue");
  const panel = document.getElementById("side-panel");
  const DIVERGING = [[0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f7f7f7"], [0.75, "#67a9cf"], [1, "#2166ac"]];
  const NO_VALUE = "#c7ccd4";

  let payload = null;          // figure JSON from the server
  let lod = false;             // the trace is drawn as bins, a window at a time
  let seqOf = new Map();       // event id -> position in the trace (in LOD mode: of the events drawn so far)
  let idOf = new Map();        // seq -> event id
  let posOf = new Map();       // seq -> [x, y]
  let hoverOf = new Map();     // seq -> hover text (already escaped by the server)
  let eventTraces = [];        // indices of the per-type marker traces
  let windowAnswer = null;     // LOD mode: the window drawn now (exact events or bins)
  let overlayIdx = -1, greyIdx = -1, selectedIdx = -1, pathIdx = -1, findingsIdx = -1;
  // Whether the critical path and the findings are drawn now: a restyle redraws every trace, so hiding what is
  // already hidden (each first draw and window) is skipped.
  const shown = {path: false, findings: false};
  let grouping = "auto";
  let firstDraw = true;
  let uiRevision = null, fits = 0;  // Plotly's uirevision once a draw has fitted an expanded role (see draw)
  const expanded = new Set();
  const folded = new Set();    // agents whose spawn subtrees show on their own lanes

  function esc(text) {
    // Plotly decodes &lt; &gt; &amp; in labels but shows &quot; literally; quotes are inert without tags.
    return String(text).replace(/[&<>]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;"}[c]));
  }

  function plotPx() {
    return {width: Math.max(100, Math.round(graph.clientWidth || 1200)), height: Math.max(100, Math.round(window.innerHeight * 0.6))};
  }

  function laneParams() {
    const params = new URLSearchParams({group: grouping, ...plotPx()});
    expanded.forEach((role) => params.append("expand", role));
    folded.forEach((agent) => params.append("collapse", agent));
    return params;
  }

  // The first figure is asked for as the page preloads it (the server's default plot size): no second request.
  function figureUrl() {
    const params = laneParams();
    params.delete("width"); params.delete("height");
    return api + "/figure?" + params;
  }

  // Remember where the events now drawn sit (all of them in exact mode; a window's in LOD mode).
  function learnEvents(ids, seqs, xs, ys) {
    ids.forEach((id, k) => {
      const seq = seqs[k];
      seqOf.set(id, seq); idOf.set(seq, id); posOf.set(seq, [xs[k], ys[k]]);
    });
    timeOrder = null;
  }

  // The figure's own traces plus, in LOD mode, the window's; then the page's overlay and marking traces.
  function compose() {
    const data = payload.figure.data.map((trace) => (lod && trace.name === "agent lifetime" ? nearView(trace) : trace))
      .concat(lod && windowAnswer ? windowAnswer.traces : []);
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

  const PLOT_CONFIG = {responsive: true, displaylogo: false, scrollZoom: true, modeBarButtonsToRemove: ["select2d", "lasso2d"]};

  // `fitRole`: a role just expanded, whose lanes the view then fits (over the whole time axis).
  async function draw(fitRole) {
    status.textContent = "drawing…";
    const started = performance.now();
    const response = await fetch(figureUrl());
    if (!response.ok) {
      status.textContent = "could not load the graph (" + response.status + ")";
      document.body.dispatchEvent(new CustomEvent("graph-drawn"));  // the analysis panel does not wait for ever
      return;
    }
    payload = await response.json();
    lod = payload.mode === "bins";
    seqOf = new Map(); idOf = new Map(); posOf = new Map(); hoverOf = new Map();
    windowAnswer = lod ? {mode: "bins", traces: payload.traces, count: payload.count, window: payload.window} : null;
    if (!lod) learnEvents(payload.event_ids, payload.event_ids.map((_, seq) => seq), payload.positions.x, payload.positions.y);
    const layout = payload.figure.layout;
    const fitted = payload.lanes.map((lane, i) => (lane.role === fitRole && !lane.group ? i : -1)).filter((i) => i >= 0);
    if (fitted.length) {
      // Fitted in the same draw (a relayout after it cost a second one): a new ui revision makes Plotly take
      // these ranges over the reader's zoom, which it otherwise keeps from draw to draw.
      uiRevision = layout.uirevision + "#fit" + (++fits);
      layout.xaxis.autorange = true;
      layout.yaxis.autorange = false;  // the range runs down, as "reversed" would
      layout.yaxis.range = [fitted[fitted.length - 1] + 0.5, fitted[0] - 0.5];
    }
    if (uiRevision) layout.uirevision = uiRevision;
    await Plotly.react(graph, compose(), layout, PLOT_CONFIG);
    if (fitted.length) {
      thinLaneLabels();
      if (lod) refineSoon();
    }
    graph.removeAllListeners && graph.removeAllListeners("plotly_click");
    graph.removeAllListeners && graph.removeAllListeners("plotly_relayout");
    drawMinimap();
    graph.on("plotly_relayout", (ev) => {
      if (Object.keys(ev).some((key) => key.startsWith("xaxis.range") || key === "xaxis.autorange")) showWindowOnMinimap();
      if (Object.keys(ev).some((key) => key.startsWith("yaxis.range") || key === "yaxis.autorange")) thinLaneLabels();
      if (lod && Object.keys(ev).some((key) => key.startsWith("xaxis.range") || key.startsWith("yaxis.range")
                                             || key === "xaxis.autorange" || key === "yaxis.autorange")) refineSoon();
    });
    graph.on("plotly_click", (ev) => {
      const point = ev.points && ev.points[0];
      if (!point || point.customdata === undefined || point.data.mode !== "markers" || !idOf.has(point.customdata)) return;
      selectEvent(idOf.get(nearestEvent(ev.event, point.customdata)));
    });
    renderLaneControls();
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
    graph.dataset.drawn = "true";
    // Lanes, not agents: a lane may be a tool, the user or a group of agents (the header counts agents).
    summary = (lod ? payload.n_events : payload.event_ids.length).toLocaleString() + " events · "
      + payload.lanes.length + " lanes";
    status.textContent = summary + " · " + timing + (lod ? " · " + windowNote() : "");
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
        if (!idOf.has(s)) return;
        const dx = xa.l2p(trace.x[k]) - px, dy = ya.l2p(trace.y[k]) - py;
        if (dx * dx + dy * dy < least) { least = dx * dx + dy * dy; best = s; }
      });
    });
    return best;
  }

  // ---- minimap: the whole trace's concurrency curve under the graph, the time window in view shaded ----
  const minimap = document.getElementById("minimap");
  const SVG = "http://www.w3.org/2000/svg";
  let span = null;  // [t0, t1] of the whole trace

  function drawMinimap() {
    const alive = payload.figure.data.find((t) => t.name === "agents alive");
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

  function showWindowOnMinimap() {
    const layout = graph._fullLayout, view = minimap && minimap.querySelector(".view");
    if (!layout || !view || !span) return;
    const width = Math.max(span[1] - span[0], 1e-9);
    const [a, b] = layout.xaxis.range.map((x) => Math.max(0, Math.min(1000, 1000 * (x - span[0]) / width)));
    view.setAttribute("x", Math.min(a, b).toFixed(1));
    view.setAttribute("width", Math.max(2, Math.abs(b - a)).toFixed(1));
  }

  if (minimap) {
    minimap.addEventListener("click", (ev) => {  // centre the view's time window where the minimap was clicked
      const layout = graph._fullLayout;
      if (!layout || !span) return;
      const box = minimap.getBoundingClientRect();
      const t = span[0] + (span[1] - span[0]) * (ev.clientX - box.left) / box.width;
      const [a, b] = layout.xaxis.range, half = Math.abs(b - a) / 2;
      Plotly.relayout(graph, {"xaxis.range": [t - half, t + half]});
    });
  }

  // ---- level of detail: the window in view, refined after each zoom or pan -----------------------------
  let summary = "", refineTimer = null, refineAsked = 0;

  function windowNote() {
    if (!windowAnswer) return "";
    return windowAnswer.mode === "exact" ? windowAnswer.count.toLocaleString() + " in view, each drawn"
                                         : windowAnswer.count.toLocaleString() + " in view, binned (zoom in for events)";
  }

  // Once the relayouts of this task are done. Plotly already holds a scroll-zoom's relayout until the wheel
  // pauses (50 ms), and an answer overtaken by a newer zoom is dropped, so no longer wait is needed.
  function refineSoon() {
    clearTimeout(refineTimer);
    const asked = performance.now();
    refineTimer = setTimeout(() => refine(asked), 0);
  }

  // Ask for the window in view and draw it; an answer overtaken by a newer zoom is dropped. The status line
  // gives the time from the zoom to the painted frame.
  async function refine(asked) {
    const layout = graph._fullLayout;
    if (!layout || !payload) return;
    const mine = ++refineAsked;
    const [x0, x1] = layout.xaxis.range, [ya, yb] = layout.yaxis.range;
    const params = laneParams();
    params.set("t0", Math.min(x0, x1)); params.set("t1", Math.max(x0, x1));
    params.set("lane0", Math.max(0, Math.min(ya, yb))); params.set("lane1", Math.max(ya, yb));
    if (overlaySelect.value) params.set("channel", overlaySelect.value);
    const response = await fetch(api + "/window?" + params);
    if (mine !== refineAsked) return;
    if (!response.ok) { status.textContent = summary + " · could not load the window (" + response.status + ")"; return; }
    windowAnswer = await response.json();
    if (mine !== refineAsked) return;
    if (windowAnswer.mode === "exact") {
      const e = windowAnswer.events;
      learnEvents(e.id, e.seq, e.x, e.y);
    }
    await Plotly.react(graph, compose(), graph.layout, PLOT_CONFIG);
    if (overlaySelect.value && windowAnswer.mode === "exact") await applyOverlay(overlaySelect.value, true);
    showPath();
    showFindings();
    if (graph.dataset.selected) {
      // still binned around an event being brought into view: narrow again (the window's count shrinks fast)
      const again = focusing === graph.dataset.selected && windowAnswer.mode !== "exact";
      if (!again) focusing = null;
      highlight(graph.dataset.selected, again);
    }
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    graph.dataset.windowMode = windowAnswer.mode;
    graph.dataset.windowMs = Math.round(performance.now() - asked);
    status.textContent = summary + " · " + windowNote() + " · detail in "
      + ((performance.now() - asked) / 1000).toFixed(2) + " s";
    graph.dispatchEvent(new CustomEvent("window-drawn"));
  }

  // In LOD mode an event not drawn yet is found on the server and the view moves to a window around it
  // narrow enough to draw its events one by one.
  async function locate(ids) {
    const wanted = ids.filter((id) => !seqOf.has(id)).slice(0, 1000);
    if (!wanted.length) return;
    const params = new URLSearchParams();
    wanted.forEach((id) => params.append("event", id));
    const response = await fetch(api + "/locate?" + params);
    if (!response.ok) return;
    (await response.json()).items.forEach((item) => {
      const lane = payload.lane_of[item.lane_owner];
      located.set(item.event_id, [item.t, lane === undefined ? 0 : lane]);
    });
  }
  const located = new Map();  // event id -> [x, y] learnt from /locate
  let focusing = null;         // the event a narrowing zoom is bringing into view

  function whereIs(eventId) {
    const seq = seqOf.get(eventId);
    if (seq !== undefined) return posOf.get(seq);
    return located.get(eventId);
  }

  // Lane labels never print over each other: as figure.py does for the whole trace, label every n-th lane of
  // those in view, n chosen so labels are at least `label_px` apart; zooming in brings the others back.
  function thinLaneLabels() {
    const axis = graph._fullLayout && graph._fullLayout.yaxis;
    const labels = payload && payload.lane_labels;
    if (!axis || !labels || !labels.length) return;
    const [a, b] = axis.range;
    const first = Math.max(0, Math.ceil(Math.min(a, b))), last = Math.min(labels.length - 1, Math.floor(Math.max(a, b)));
    const step = Math.max(1, Math.ceil(Math.max(1, last - first + 1) * payload.label_px / Math.max(axis._length, 1)));
    const values = [];
    for (let lane = Math.ceil(first / step) * step; lane <= last; lane += step) values.push(lane);
    Plotly.relayout(graph, {"yaxis.tickvals": values, "yaxis.ticktext": values.map((lane) => labels[lane])});
  }

  function renderLaneControls() {
    groupBox.checked = payload.grouped;
    laneGroups.replaceChildren();
    payload.lanes.forEach((lane) => {
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

  // The share of the plot's width a drawer leaves uncovered (all of it when the panel sits beside the graph).
  function uncoveredShare() {
    if (!panel.classList.contains("open") || !window.matchMedia("(max-width: 1279px)").matches) return 1;
    const plot = graph.getBoundingClientRect(), drawer = panel.getBoundingClientRect();
    return Math.max(0.3, Math.min(1, (drawer.left - plot.left) / plot.width));
  }

  async function highlight(eventId, intoView) {
    if (!payload) return;
    if (lod && !whereIs(eventId)) await locate([eventId]);
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
      if (lod && windowAnswer && windowAnswer.mode !== "exact") {
        // narrow the view until the window around the event is drawn event by event
        focusing = eventId;
        span = Math.max(span * Math.min(0.5, 2000 / Math.max(windowAnswer.count, 1)), 1e-9);
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

  function markTableRow(eventId) {
    document.querySelectorAll("#events-table tr.selected").forEach((row) => row.classList.remove("selected"));
    const row = document.querySelector('#events-table tr[data-event-id="' + CSS.escape(eventId) + '"]');
    if (row) row.classList.add("selected");
  }

  // A selection scrolls the page to the graph and its panel when they are not both in the window.
  function bringWorkspaceIntoView() {
    const box = graph.closest(".workspace").getBoundingClientRect();
    if (box.top < 0 || box.top > window.innerHeight * 0.25) graph.closest(".workspace").scrollIntoView({block: "start"});
  }

  function eventUrl(eventId) {
    return base + "?event=" + encodeURIComponent(eventId) + (queueId ? "&queue=" + encodeURIComponent(queueId) : "");
  }

  // What every selection does (a marker, a table row, j/k/n, an edge link, a permalink): load the event
  // into the side panel (opening it when it is a drawer), mark it everywhere, keep it in view on the graph,
  // update the URL.
  let inspectorLoaded = Promise.resolve();
  function selectEvent(eventId) {
    graph.dataset.selected = eventId;
    highlight(eventId, true);
    markTableRow(eventId);
    panel.classList.add("open");
    bringWorkspaceIntoView();
    history.replaceState(null, "", eventUrl(eventId));
    inspectorLoaded = htmx.ajax("GET", eventUrl(eventId), {target: "#event-inspector", swap: "outerHTML"});
    return inspectorLoaded;
  }

  // In LOD mode the server colours bins itself; exact windows come with the channel's values.
  async function applyOverlay(channel, fromWindow) {
    if (!payload) return;
    if (!channel) {
      Plotly.restyle(graph, {visible: true}, eventTraces);
      Plotly.restyle(graph, {visible: false}, [overlayIdx, greyIdx]);
      delete graph.dataset.overlay;
      if (lod && !fromWindow) refineSoon();
      return;
    }
    let seqs, values;
    if (lod) {
      if (!windowAnswer || windowAnswer.mode !== "exact" || !windowAnswer.events.values) {
        graph.dataset.overlay = channel;
        if (!fromWindow) refineSoon();  // the window comes back coloured (bins) or with the values (events)
        return;
      }
      seqs = windowAnswer.events.seq;
      values = windowAnswer.events.values;
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
      const seq = seqs[k], [x, y] = posOf.get(seq);
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

  // Fold (or unfold) an agent's spawn subtree onto its lane: from the spawn-tree panel or the lane controls.
  function fold(agent) {
    folded.has(agent) ? folded.delete(agent) : folded.add(agent);
    draw();
  }
  document.addEventListener("click", (ev) => {
    const button = ev.target.closest("button[data-fold]");
    if (!button) return;
    ev.preventDefault();  // a button inside <summary>: fold, do not open or close the branch
    fold(button.dataset.fold);
  });

  overlaySelect.addEventListener("change", () => applyOverlay(overlaySelect.value));
  overlaySize.addEventListener("change", () => applyOverlay(overlaySelect.value));
  groupBox.addEventListener("change", () => {
    grouping = groupBox.checked ? "role" : "agent";
    expanded.clear();
    draw();
  });

  // Table rows and edge links select events; an inspector swap (e.g. an edge link) moves the marker.
  document.addEventListener("click", (ev) => {
    const row = ev.target.closest("#events-table tbody tr[data-event-id]");
    if (row && !ev.target.closest("a")) { selectEvent(row.dataset.eventId); }
  });
  document.addEventListener("keydown", (ev) => {
    const row = ev.target.closest && ev.target.closest("#events-table tbody tr[data-event-id]");
    if (row && ev.key === "Enter") selectEvent(row.dataset.eventId);
  });
  document.body.addEventListener("htmx:afterSwap", () => {
    const head = document.querySelector("#event-inspector [data-selected-event]");
    if (head && head.dataset.selectedEvent !== graph.dataset.selected) {
      graph.dataset.selected = head.dataset.selectedEvent;
      highlight(head.dataset.selectedEvent, true);
      history.replaceState(null, "", eventUrl(head.dataset.selectedEvent));
      panel.classList.add("open");
    }
    if (graph.dataset.selected) markTableRow(graph.dataset.selected);
  });

  // Keyboard labelling: j/k move in time order, n jumps to the next event without your label,
  // 1-5 set credit and save, r focuses the reward family, u undoes, ? shows the sheet.
  const CREDIT_KEYS = {"1": -1, "2": -0.5, "3": 0, "4": 0.5, "5": 1};
  let reviewer = graph.dataset.reviewer;
  const labelled = new Set();
  let timeOrder = null;

  // j/k and n move through the events drawn: all of them, or in LOD mode those of the windows seen so far.
  function eventsInTimeOrder() {
    if (!timeOrder && payload) {
      timeOrder = [...posOf.keys()].sort((a, b) => (posOf.get(a)[0] - posOf.get(b)[0]) || (a - b));
    }
    return timeOrder || [];
  }

  function step(delta, wanted) {
    const order = eventsInTimeOrder();
    if (!order.length) return;
    const current = seqOf.get(graph.dataset.selected);
    let at = current === undefined ? -1 : order.indexOf(current);
    for (let tries = 0; tries < order.length; tries++) {
      at = (at + delta + order.length) % order.length;
      const id = idOf.get(order[at]);
      if (!wanted || wanted(id)) { selectEvent(id); return; }
    }
  }

  // Without a reviewer identity, the first labelling key asks for a name in place (open single-user mode),
  // then does what the key asked.
  const reviewerDialog = document.getElementById("reviewer-dialog");
  function askReviewer() {
    return new Promise((resolve) => {
      const form = document.getElementById("reviewer-inline");
      const error = document.getElementById("reviewer-error");
      error.hidden = true;
      reviewerDialog.showModal();
      document.getElementById("reviewer-new-name").focus();
      form.onsubmit = async (ev) => {
        ev.preventDefault();
        const response = await fetch(form.action, {method: "POST", body: new URLSearchParams(new FormData(form))});
        if (!response.ok) {
          error.textContent = "Not saved: " + (response.status === 422 ? "that name cannot be used" : response.status);
          error.hidden = false;
          return;
        }
        reviewer = document.getElementById("reviewer-new-name").value.trim();
        graph.dataset.reviewer = reviewer;
        document.querySelectorAll("#reviewer-name").forEach((el) => { el.textContent = reviewer; });
        reviewerDialog.close();
        await loadLabelled();
        if (graph.dataset.selected) await selectEvent(graph.dataset.selected);  // the form, now for this name
        resolve(true);
      };
      document.getElementById("reviewer-cancel").onclick = () => { reviewerDialog.close(); resolve(false); };
    });
  }

  async function withForm(action) {
    if (!reviewer && !(await askReviewer())) return;
    await inspectorLoaded;
    const form = document.getElementById("label-form");
    if (!form) return;
    htmx.process(form);  // a form swapped in a moment ago may not be wired yet: submit it through htmx
    action(form);
  }

  // Enter saves and goes to the next item: the next event without your label, or your next queue item.
  let nextAfterSave = false;
  function goNext(form) {
    if (form && form.dataset.queue) window.location.assign("/queues/" + encodeURIComponent(form.dataset.queue) + "/next");
    else step(1, (id) => !labelled.has(id));
  }

  function setCredit(form, value) {
    const number = form.querySelector("#credit-number");
    if (!number) return;  // this queue does not ask for credit
    number.value = value;
    form.querySelector("#credit-range").value = value;
    creditSet(true);
    form.requestSubmit(form.querySelector("button[value=save]"));
  }

  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const inForm = ev.target.closest && ev.target.closest("#label-form");
    if (ev.key === "Enter" && !ev.shiftKey && !ev.target.closest("textarea, button, a, dialog, #events-table")
        && (inForm || ev.target === document.body) && document.getElementById("label-form")) {
      ev.preventDefault();
      withForm((form) => { nextAfterSave = true; form.requestSubmit(form.querySelector("button[value=save]")); });
      return;
    }
    const typing = ev.target.closest && ev.target.closest("input, textarea, select, [contenteditable]");
    if (typing) {
      if (ev.key === "Escape") ev.target.blur();
      return;
    }
    if (ev.key === "Escape" && panel.classList.contains("open") && window.matchMedia("(max-width: 1279px)").matches) {
      panel.classList.remove("open");
      return;
    }
    const dialog = document.getElementById("shortcuts");
    if (ev.key === "?") { dialog.open ? dialog.close() : dialog.showModal(); ev.preventDefault(); return; }
    if (ev.key === "j") step(1);
    else if (ev.key === "k") step(-1);
    else if (ev.key === "n") step(1, (id) => !labelled.has(id));
    else if (ev.key in CREDIT_KEYS) withForm((form) => setCredit(form, CREDIT_KEYS[ev.key]));
    else if (ev.key === "r") withForm((form) => { const family = form.querySelector("#reward-family"); if (family) family.focus(); });
    else if (ev.key === "u") withForm((form) => {
      const undo = form.querySelector("#label-undo");
      if (undo && !undo.disabled) undo.click();  // a click, so htmx sends the button's action
    });
    else return;
    ev.preventDefault();
  });
  document.getElementById("shortcuts-button").addEventListener("click",
    () => document.getElementById("shortcuts").showModal());

  // The credit slider and number box show the same value; the number box is what the form sends. No credit
  // shows as none: an empty box and a slider without its thumb, until one is moved.
  function creditSet(isSet) {
    const range = document.getElementById("credit-range"), none = document.getElementById("credit-none");
    if (isSet) range.removeAttribute("data-unset"); else range.setAttribute("data-unset", "true");
    if (none) none.hidden = !isSet;
  }
  document.addEventListener("input", (ev) => {
    if (ev.target.id === "credit-range") {
      document.getElementById("credit-number").value = ev.target.value;
      creditSet(true);
    }
    if (ev.target.id === "credit-number") {
      if (ev.target.value !== "") document.getElementById("credit-range").value = ev.target.value;
      creditSet(ev.target.value !== "");
    }
  });
  document.addEventListener("click", (ev) => {
    if (ev.target.id === "credit-none") {
      document.getElementById("credit-number").value = "";
      document.getElementById("credit-range").value = 0;
      creditSet(false);
    }
    if (ev.target.closest("[data-close-panel]")) panel.classList.remove("open");
    if (ev.target.closest("[data-ask-reviewer]")) { ev.preventDefault(); askReviewer(); }
  });

  // A saved label updates the set `n` skips, and a human-credit overlay shows the new value; after Enter, a
  // successful save moves on to the next item (a refused one stays, showing why).
  document.body.addEventListener("htmx:afterSwap", (ev) => {
    const form = document.getElementById("label-form");
    if (!form) return;
    if (nextAfterSave && ev.detail.target && ev.detail.target.id === "label-form") {
      nextAfterSave = false;
      if (form.dataset.saved === "true") {
        form.dataset.labelled === "true" ? labelled.add(form.dataset.eventId) : labelled.delete(form.dataset.eventId);
        goNext(form);
        return;
      }
    }
    form.dataset.labelled === "true" ? labelled.add(form.dataset.eventId) : labelled.delete(form.dataset.eventId);
    if (reviewer && form.dataset.labelled === "true") {
      ["human credit (mean)", "human credit: " + reviewer].forEach((name) => {
        if ([...overlaySelect.options].some((o) => o.value === name)) return;
        const option = document.createElement("option");
        option.value = name;
        option.textContent = name;
        overlaySelect.insertBefore(option, overlaySelect.options[1] || null);
      });
    }
    if (overlaySelect.value.startsWith("human credit")) applyOverlay(overlaySelect.value);
  });

  async function loadLabelled() {
    if (!reviewer) return;
    const params = new URLSearchParams({trace_id: traceId, reviewer: reviewer});
    const response = await fetch("/api/annotations?" + params);
    if (!response.ok) return;
    (await response.json()).items.forEach((label) => {
      if (!label.empty) labelled.add(label.event_id);
    });
  }

  // Critical path and audit findings from the analysis panel (loaded after the page) mark the graph.
  async function positionsOf(ids) {
    if (lod) await locate(ids);
    const xs = [], ys = [];
    ids.forEach((id) => {
      const at = whereIs(id);
      if (at) { xs.push(at[0]); ys.push(at[1]); }
    });
    return {xs, ys};
  }

  async function showPath() {
    const box = document.getElementById("show-critical-path");
    if (!payload || pathIdx < 0) return;
    const on = Boolean(box && box.checked);
    if (!on && !shown.path) return;
    const {xs, ys} = on ? await positionsOf(JSON.parse(box.dataset.path)) : {xs: [], ys: []};
    shown.path = on;
    Plotly.restyle(graph, {x: [xs], y: [ys], visible: on}, [pathIdx]);
  }

  let activeFinding = null;
  async function showFindings() {
    const box = document.getElementById("show-findings");
    if (!payload || findingsIdx < 0) return;
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
  document.body.addEventListener("graph-drawn", listChannelsLater, {once: true});

  window.orchestrace = {selectEvent, applyOverlay, redraw: draw, seqOf: (id) => seqOf.get(id),
                        position: (seq) => { const at = posOf.get(seq); return at && {x: at[0], y: at[1]}; }};
  loadLabelled();
  draw();
})();

// Find: a search box over agents, roles, tools and event ids. The server answers the suggestions (a trace may
// have a million events); choosing one selects its first event in time order (an event id, that event) through
// the page's own selection, which brings it into view and loads its panel. `/` focuses the box.
(function () {
  "use strict";
  const input = document.getElementById("find-input");
  const list = document.getElementById("find-list");
  const note = document.getElementById("find-status");
  const graph = document.getElementById("graph");
  if (!input || !list || !graph) return;
  const api = "/api/traces/" + encodeURIComponent(graph.dataset.traceId) + "/search";
  let items = [], active = -1, asked = 0, answered = null, timer = null;

  function say(text, bad) { note.textContent = text; note.classList.toggle("bad", Boolean(bad)); }

  function close() {
    list.hidden = true;
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
  }

  function show(found) {
    items = found;
    active = found.length ? 0 : -1;
    list.replaceChildren(...found.map((item, i) => {
      const option = document.createElement("li");
      option.id = "find-option-" + i;
      option.setAttribute("role", "option");
      const kind = document.createElement("span"), value = document.createElement("span"), n = document.createElement("span");
      kind.className = "kind"; kind.textContent = item.kind;
      value.className = "value"; value.textContent = item.value; value.title = item.value;
      n.className = "n"; n.textContent = item.kind === "event" ? "" : item.events.toLocaleString() + " ev";
      option.append(kind, value, n);
      option.addEventListener("mousedown", (ev) => { ev.preventDefault(); choose(i); });  // before the input blurs
      return option;
    }));
    mark();
    const open = found.length > 0 && document.activeElement === input;
    list.hidden = !open;
    input.setAttribute("aria-expanded", String(open));
    say(found.length || !input.value.trim() ? "" : "no match", found.length === 0);
  }

  function mark() {
    [...list.children].forEach((option, i) => option.setAttribute("aria-selected", String(i === active)));
    if (active < 0) { input.removeAttribute("aria-activedescendant"); return; }
    input.setAttribute("aria-activedescendant", "find-option-" + active);
    list.children[active].scrollIntoView({block: "nearest"});
  }

  // One request per pause in typing; an answer to an older text is dropped.
  function ask() {
    const q = input.value.trim();
    const mine = ++asked;
    if (!q) { answered = Promise.resolve(); show([]); return answered; }
    answered = fetch(api + "?" + new URLSearchParams({q: q, limit: 20}))
      .then((response) => (response.ok ? response.json() : {items: []}))
      .then((body) => { if (mine === asked) show(body.items); })
      .catch(() => { if (mine === asked) say("search failed", true); });
    return answered;
  }

  function choose(i) {
    const item = items[i];
    if (!item) return;
    close();
    input.value = item.value;
    say(item.kind === "event" ? "event" : item.kind + " · " + item.events.toLocaleString()
        + " event" + (item.events === 1 ? "" : "s"));
    note.title = item.kind === "event" ? "" : "its first event in time order is selected";
    if (window.orchestrace) window.orchestrace.selectEvent(item.first_event);
  }

  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { timer = null; ask(); }, 120);
  });
  input.addEventListener("focus", () => { if (items.length && input.value.trim()) { list.hidden = false; input.setAttribute("aria-expanded", "true"); } });
  input.addEventListener("blur", close);
  input.addEventListener("keydown", async (ev) => {
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      if (list.hidden && items.length) { list.hidden = false; input.setAttribute("aria-expanded", "true"); }
      else if (items.length) active = (active + (ev.key === "ArrowDown" ? 1 : -1) + items.length) % items.length;
      mark();
      ev.preventDefault();
    } else if (ev.key === "Enter") {
      ev.preventDefault();
      if (timer) { clearTimeout(timer); timer = null; await ask(); }  // typed and pressed Enter at once
      else if (answered) await answered;
      if (items.length) choose(Math.max(active, 0));
      else if (input.value.trim()) say("no match", true);
    } else if (ev.key === "Escape" && !list.hidden) {
      close();
      ev.stopPropagation();  // the first Escape closes the list, the next leaves the box
    }
  });

  document.addEventListener("keydown", (ev) => {
    if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.target.closest && ev.target.closest("input, textarea, select, [contenteditable], dialog")) return;
    ev.preventDefault();
    input.focus();
    input.select();
  });
})();
