// Find: a search box over agents, roles, tools and event ids. The server answers the suggestions (a trace may
// have a million events); choosing one selects its first event in time order (an event id, that event) through
// the page's own selection, which brings it into view and loads its panel; an agent gets its own lane shown and
// marked first. `/` focuses the box.

import {showAgent} from "./lanes.js";
import {api, graph} from "./state.js";
import {selectEvent} from "./workspace.js";

const input = document.getElementById("find-input");
const list = document.getElementById("find-list");
const note = document.getElementById("find-status");
const searchApi = api + "/search";
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
  answered = fetch(searchApi + "?" + new URLSearchParams({q: q, limit: 20}))
    .then((response) => (response.ok ? response.json() : {items: []}))
    .then((body) => { if (mine === asked) show(body.items); })
    .catch(() => { if (mine === asked) say("search failed", true); });
  return answered;
}

// An agent is shown on its own lane first (lanes.js showAgent: its role expanded, a folded ancestor unfolded),
// then its first event is selected.
async function choose(i) {
  const item = items[i];
  if (!item) return;
  close();
  input.value = item.value;
  say(item.kind === "event" ? "event" : item.kind + " · " + item.events.toLocaleString()
      + " event" + (item.events === 1 ? "" : "s"));
  note.title = item.kind === "event" ? "" : "its first event in time order is selected";
  if (item.kind === "agent") await showAgent(item.value);
  selectEvent(item.first_event);
}

export function initFind() {
  if (!input || !list || !graph) return;
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
}
