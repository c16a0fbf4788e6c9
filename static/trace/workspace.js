// The review workspace: selecting an event (a marker, a table row, j/k/n, an edge link, a permalink) loads it into
// the side panel and marks it everywhere; keyboard labelling, the reviewer dialog and the label form's events.

import {applyOverlay, highlight} from "./graph.js";
import {graph, overlaySelect, pageUrl, panel, state, traceId} from "./state.js";

const base = "/traces/" + encodeURIComponent(traceId);
const queueId = new URLSearchParams(window.location.search).get("queue");

function markTableRow(eventId) {
  document.querySelectorAll("#events-table tr.selected").forEach((row) => row.classList.remove("selected"));
  const row = document.querySelector('#events-table tr[data-event-id="' + CSS.escape(eventId) + '"]');
  if (row) row.classList.add("selected");
}

// A selection scrolls the page to the graph and its panel when they are not both in the window.
export function bringWorkspaceIntoView() {
  const box = graph.closest(".workspace").getBoundingClientRect();
  if (box.top < 0 || box.top > window.innerHeight * 0.25) graph.closest(".workspace").scrollIntoView({block: "start"});
}

function eventUrl(eventId) {
  return base + "?event=" + encodeURIComponent(eventId) + (queueId ? "&queue=" + encodeURIComponent(queueId) : "");
}

// The address bar keeps the graph's view (state.js view) beside the selected event.
function pageWithEvent(eventId) {
  return pageUrl(queueId ? {event: eventId, queue: queueId} : {event: eventId});
}

// What every selection does (a marker, a table row, j/k/n, an edge link, a permalink): load the event
// into the side panel (opening it when it is a drawer), mark it everywhere, keep it in view on the graph,
// update the URL.
let inspectorLoaded = Promise.resolve();
export function selectEvent(eventId) {
  graph.dataset.selected = eventId;
  highlight(eventId, true);
  markTableRow(eventId);
  panel.classList.add("open");
  bringWorkspaceIntoView();
  history.replaceState(null, "", pageWithEvent(eventId));
  inspectorLoaded = htmx.ajax("GET", eventUrl(eventId), {target: "#event-inspector", swap: "outerHTML"});
  return inspectorLoaded;
}

// Keyboard labelling: j/k move in time order, n jumps to the next event without your label,
// 1-5 set credit and save, r focuses the reward family, u undoes, ? shows the sheet.
const CREDIT_KEYS = {"1": -1, "2": -0.5, "3": 0, "4": 0.5, "5": 1};
let reviewer;  // the name labels are saved under (none yet in open single-user mode)
const labelled = new Set();

// j/k and n move through the events drawn: all of them, or in LOD mode those of the windows seen so far.
function eventsInTimeOrder() {
  if (!state.timeOrder && state.payload) {
    state.timeOrder = [...state.posOf.keys()].sort((a, b) => (state.posOf.get(a)[0] - state.posOf.get(b)[0]) || (a - b));
  }
  return state.timeOrder || [];
}

function step(delta, wanted) {
  const order = eventsInTimeOrder();
  if (!order.length) return;
  const current = state.seqOf.get(graph.dataset.selected);
  let at = current === undefined ? -1 : order.indexOf(current);
  for (let tries = 0; tries < order.length; tries++) {
    at = (at + delta + order.length) % order.length;
    const id = state.idOf.get(order[at]);
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

// The credit slider and number box show the same value; the number box is what the form sends. No credit
// shows as none: an empty box and a slider without its thumb, until one is moved.
function creditSet(isSet) {
  const range = document.getElementById("credit-range"), none = document.getElementById("credit-none");
  if (isSet) range.removeAttribute("data-unset"); else range.setAttribute("data-unset", "true");
  if (none) none.hidden = !isSet;
}

export async function loadLabelled() {
  if (!reviewer) return;
  const params = new URLSearchParams({trace_id: traceId, reviewer: reviewer});
  const response = await fetch("/api/annotations?" + params);
  if (!response.ok) return;
  (await response.json()).items.forEach((label) => {
    if (!label.empty) labelled.add(label.event_id);
  });
}

export function initWorkspace() {
  reviewer = graph.dataset.reviewer;
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
      history.replaceState(null, "", pageWithEvent(head.dataset.selectedEvent));
      panel.classList.add("open");
    }
    if (graph.dataset.selected) markTableRow(graph.dataset.selected);
  });
  // Keyboard labelling (see CREDIT_KEYS); Enter saves and goes to the next item.
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
}
