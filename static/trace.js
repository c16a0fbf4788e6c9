// Trace page: draws the interaction graph, keeps graph, inspector, table and URL in sync, and recolours
// markers by an overlay channel. A trace of up to 5,000 events is drawn event by event once; a larger one opens
// as bins (level of detail) and each zoom or pan asks the server for its window: exact events once they are
// few enough, bins otherwise, so the browser never holds more marks than the plot has pixels.
//
// An ES module (no bundler) over the modules of static/trace/, one per concern: state.js (what they share),
// graph.js (drawing, overlays, marks, the selected event), lanes.js, lod.js (windows), minimap.js,
// workspace.js (selection, inspector, keyboard labelling), find.js and delete.js. Their functions call each
// other only once the page has started, so imports may go both ways.

import {initDeleteControl} from "./trace/delete.js";
import {initFind} from "./trace/find.js";
import {applyOverlay, draw, initGraph} from "./trace/graph.js";
import {initLanes} from "./trace/lanes.js";
import {initMinimap} from "./trace/minimap.js";
import {graph, state} from "./trace/state.js";
import {initWorkspace, loadLabelled, selectEvent} from "./trace/workspace.js";

initDeleteControl();
if (graph && window.Plotly) {
  initMinimap();
  initLanes();
  initGraph();
  initWorkspace();
  // What the browser tests call from outside the page.
  window.orchestrace = {selectEvent, applyOverlay, redraw: draw, seqOf: (id) => state.seqOf.get(id),
                        position: (seq) => { const at = state.posOf.get(seq); return at && {x: at[0], y: at[1]}; }};
  loadLabelled();
  draw();
}
initFind();
