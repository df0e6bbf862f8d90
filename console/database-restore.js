// A database's point-in-time restore picker (docs/databases.md "Point-in-time restore"): a moment
// within the detail's restoreWindow, to the second, restored into a new database (202, restoring).
import { h } from "./ui.js";

/** "YYYY-MM-DDTHH:MM:SS" in local time, as a datetime-local input takes it. */
export function localInputValue(iso, { roundUp = false } = {}) {
  const ms = new Date(iso).getTime();
  const d = new Date(roundUp ? Math.ceil(ms / 1000) * 1000 : ms);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** The picker for `db` (null without a restore window); `restore(timestamp)` sends the request. */
export function restorePicker(db, restore) {
  const window = db.restoreWindow;
  if (!window) return null;
  const id = `restore-${db.id}`;
  const min = localInputValue(window.earliest, { roundUp: true });
  const max = localInputValue(window.latest);
  // A window begun less than a second ago may hold no whole second yet (the picker's step).
  const empty = min > max;
  const at = h("input", { id, type: "datetime-local", step: 1, required: true, min, max, value: max, disabled: empty });
  const form = h(
    "form",
    { className: "row", "aria-label": `Restore ${db.databaseName}` },
    h("label", { for: id }, "Restore to"),
    at,
    h("button", { type: "submit", disabled: empty }, "Restore into a new database"),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!at.reportValidity()) return;
    restore(new Date(at.value).toISOString());
  });
  return h(
    "details",
    { className: "restore" },
    h("summary", {}, "Restore to a point in time…"),
    h(
      "p",
      { className: "muted" },
      empty
        ? "The window holds no whole second yet: refresh in a moment."
        : `Any second from ${new Date(window.earliest).toLocaleString()} to ${new Date(window.latest).toLocaleString()}.`,
    ),
    form,
  );
}
