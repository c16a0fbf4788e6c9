// Queue review workspace: keys set fields without saving (credit 1-5 on an event; a, b, t choose on a pair);
// Enter saves once and the server answers with the next item, swapped in place; s skips. The form drops a second
// submit while one is in flight (hx-sync), and each drawn form carries a fresh request id, so a key held down or
// pressed twice saves one version.
(function () {
  "use strict";
  const CREDIT_KEYS = {"1": -1, "2": -0.5, "3": 0, "4": 0.5, "5": 1};
  const CHOICE_KEYS = {"a": "a", "b": "b", "t": "tie"};

  function form() { return document.querySelector("#queue-workspace #label-form, #queue-workspace #pair-form"); }

  function choose(value) {
    const radio = document.querySelector('#pair-form input[name="choice"][value="' + value + '"]');
    if (radio) radio.checked = true;
    return Boolean(radio);
  }

  function setCredit(value) {
    const number = document.getElementById("credit-number"), range = document.getElementById("credit-range");
    if (!number) return;  // this queue does not ask for credit
    number.value = value;
    range.value = value;
    range.removeAttribute("data-unset");
    const none = document.getElementById("credit-none");
    if (none) none.hidden = false;
  }

  function submit(action) {
    const f = form();
    if (!f) return;
    htmx.process(f);  // a form swapped in a moment ago may not be wired yet: submit it through htmx
    const button = f.querySelector('button[value="' + action + '"]');
    if (button && !button.disabled) button.click();  // a click, so htmx sends the button's action
  }

  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || !form()) return;
    const target = ev.target;
    if (ev.key === "Enter" && !ev.shiftKey && !target.closest("textarea, button, a, select, summary")) {
      ev.preventDefault();
      submit("save");
      return;
    }
    if (target.closest("input, textarea, select, [contenteditable]")) {
      if (ev.key === "Escape") target.blur();
      return;
    }
    if (ev.key in CREDIT_KEYS) setCredit(CREDIT_KEYS[ev.key]);
    else if (ev.key in CHOICE_KEYS && choose(CHOICE_KEYS[ev.key])) document.getElementById("pair-reason").focus();
    else if (ev.key === "s") submit("skip");
    else return;
    ev.preventDefault();
  });

  // The reason is written in a textarea, where Enter starts a line: Ctrl+Enter (Cmd+Enter) saves from there.
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && ev.target.id === "pair-reason") {
      ev.preventDefault();
      submit("save");
    }
  });

  // The slider and the number box show the same value; the number box is what the form sends.
  document.addEventListener("input", (ev) => {
    if (ev.target.id === "credit-range") setCredit(ev.target.value);
    if (ev.target.id === "credit-number" && ev.target.value !== "") {
      document.getElementById("credit-range").value = ev.target.value;
      document.getElementById("credit-range").removeAttribute("data-unset");
    }
  });
  document.addEventListener("click", (ev) => {
    if (ev.target.id !== "credit-none") return;
    document.getElementById("credit-number").value = "";
    document.getElementById("credit-range").setAttribute("data-unset", "true");
    ev.target.hidden = true;
  });

  document.body.addEventListener("htmx:responseError", (ev) => {
    if (!ev.detail.target || ev.detail.target.id !== "pair-diff") return;
    ev.detail.target.textContent = "The diff of the two runs could not be drawn (the server answered " +
      ev.detail.xhr.status + "); open each trace above to compare them.";
  });

  // A new item drawn: keys go to the page again (the button pressed is gone), and its top is in view.
  document.body.addEventListener("htmx:afterSwap", (ev) => {
    if (!ev.detail.target || ev.detail.target.id !== "queue-workspace") return;
    if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
    const workspace = document.getElementById("queue-workspace");
    if (workspace && workspace.getBoundingClientRect().top < 0) workspace.scrollIntoView({block: "start"});
  });
})();
