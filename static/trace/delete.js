// Delete control: a confirmation saying what is removed and that labels are kept, then the JSON API's
// DELETE (force=true keeps the labels); it carries the page's form token like every write from our pages.

const dialog = document.getElementById("delete-trace");
const opener = document.getElementById("delete-trace-button");
const confirm = document.getElementById("delete-trace-confirm");
const error = document.getElementById("delete-trace-error");

export function initDeleteControl() {
  if (!dialog || !opener) return;
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
}
