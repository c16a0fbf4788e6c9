// Trace list: a table wider than the page shows a shadow on the side that has more columns.
(function () {
  "use strict";
  function mark(frame) {
    const box = frame.querySelector(".table-scroll");
    if (!box) return;
    frame.classList.toggle("more-right", box.scrollLeft + box.clientWidth < box.scrollWidth - 1);
    box.classList.toggle("more-left", box.scrollLeft > 0);
  }
  const markAll = () => document.querySelectorAll(".scroll-frame").forEach(mark);
  document.addEventListener("scroll", (ev) => {
    const frame = ev.target.closest && ev.target.closest(".scroll-frame");
    if (frame) mark(frame);
  }, true);  // scroll events do not bubble: listen while they go down
  window.addEventListener("resize", markAll);
  document.body.addEventListener("htmx:afterSettle", markAll);
  markAll();
})();

// Trace list: drag-and-drop onto the upload form hands the files to its input and submits it.
(function () {
  "use strict";
  const form = document.getElementById("upload-form");
  if (!form) return;
  const input = form.querySelector("input[type=file]");
  ["dragenter", "dragover"].forEach((name) => form.addEventListener(name, (ev) => {
    ev.preventDefault();
    form.classList.add("dragging");
  }));
  ["dragleave", "drop"].forEach((name) => form.addEventListener(name, () => form.classList.remove("dragging")));
  form.addEventListener("drop", (ev) => {
    ev.preventDefault();
    if (!ev.dataTransfer || !ev.dataTransfer.files.length) return;
    input.files = ev.dataTransfer.files;
    form.requestSubmit();
  });
  // Answers the upload route does not render itself (a form token refused, a body over the size limit, a
  // server failure) come as JSON or nothing: say what went wrong in the result box, keep the box for the next try.
  function showRefusal(status, message) {
    const box = document.getElementById("upload-result");
    const notice = document.createElement("div");
    notice.className = "notice error";
    const line = document.createElement("p");
    const head = document.createElement("strong");
    head.textContent = "Refused, nothing stored.";
    line.append(head, " " + message + (status ? " (HTTP " + status + ")" : ""));
    notice.append(line);
    box.replaceChildren(notice);
  }
  document.body.addEventListener("htmx:beforeSwap", (ev) => {
    if (!ev.detail.target || ev.detail.target.id !== "upload-result") return;
    const xhr = ev.detail.xhr;
    if ((xhr.getResponseHeader("Content-Type") || "").startsWith("text/html") && xhr.status < 500) return;
    ev.detail.shouldSwap = false;
    ev.detail.isError = false;
    let message = "the server could not store the upload; try again";
    try { message = JSON.parse(xhr.responseText).error || message; } catch (exc) { /* not JSON: keep the default */ }
    showRefusal(xhr.status, message);
  });
  document.body.addEventListener("htmx:sendError", (ev) => {
    if (ev.detail.target && ev.detail.target.id === "upload-result") {
      showRefusal(0, "the server could not be reached; check that it is running and try again.");
    }
  });
  // A finished upload changes the list: refresh the table so new traces show at once.
  document.body.addEventListener("htmx:afterSwap", (ev) => {
    if (ev.detail.target && ev.detail.target.id === "upload-result" && document.querySelector(".upload-ok")) {
      htmx.ajax("GET", window.location.pathname + window.location.search, {target: "#trace-table", swap: "outerHTML"});
    }
  });
})();
