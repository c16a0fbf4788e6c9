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
  // A finished upload changes the list: refresh the table so new traces show at once.
  document.body.addEventListener("htmx:afterSwap", (ev) => {
    if (ev.detail.target && ev.detail.target.id === "upload-result" && document.querySelector(".upload-ok")) {
      htmx.ajax("GET", window.location.pathname + window.location.search, {target: "#trace-table", swap: "outerHTML"});
    }
  });
})();
