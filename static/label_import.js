// Labels page: the import form posts the chosen file with htmx (so with the page's form token) to the JSON
// API, then shows its answer in place: how many versions were imported and skipped, or each refused row
// with its line (CSV) or item (JSON). After an import the labels table reloads with the current filters.
(function () {
  "use strict";
  const form = document.getElementById("label-import");
  const result = document.getElementById("label-import-result");
  if (!form || !result) return;

  function plural(n, word) {
    return n + " " + word + (n === 1 ? "" : "s");
  }

  function notice(kind, text, problems) {
    const box = document.createElement("div");
    box.className = "notice " + kind;
    const p = document.createElement("p");
    p.textContent = text;
    box.appendChild(p);
    if (problems && problems.length) {
      const list = document.createElement("ul");
      list.className = "import-errors";
      problems.forEach((problem) => {
        const item = document.createElement("li");
        const where = document.createElement("code");
        where.textContent = problem.where || problem.path || "file";
        item.append(where, " " + (problem.message || ""));
        list.appendChild(item);
      });
      box.appendChild(list);
    }
    result.replaceChildren(box);
  }

  form.addEventListener("htmx:afterRequest", (ev) => {
    const xhr = ev.detail.xhr;
    let body = null;
    try {
      body = JSON.parse(xhr.responseText);
    } catch (err) {
      body = null;
    }
    if (xhr.status === 200 && body && typeof body.imported === "number") {
      notice("ok", "Imported " + plural(body.imported, "label version") + "; skipped " + body.unchanged +
        " already here.");
      form.querySelector("input[type=file]").value = "";
      htmx.ajax("GET", window.location.pathname + window.location.search, {target: "#labels-table", swap: "outerHTML"});
    } else if (xhr.status === 0) {
      notice("error", "The server did not answer: nothing was imported.");
    } else {
      const problems = body && Array.isArray(body.errors) ? body.errors : [];
      const message = (body && body.error) || ("refused (HTTP " + xhr.status + ")");
      // a refusal with rows already says "nothing imported"; the others (415, 403, ...) do not
      notice("error", problems.length ? message : "Nothing imported: " + message, problems);
    }
  });
})();
