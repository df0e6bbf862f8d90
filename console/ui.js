// DOM helpers: elements are built with text nodes only (no innerHTML: nothing a tenant typed can become markup).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "className") el.className = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An error in words (the API's message), announced to screen readers. */
export function errorBox(err) {
  return h("p", { className: "error", role: "alert" }, err?.message ?? String(err));
}

/** Runs `action`, showing its error in `slot` (cleared first). */
export async function guarded(slot, action) {
  slot.replaceChildren();
  try {
    return await action();
  } catch (err) {
    if (err?.name === "AbortError") return undefined;
    slot.replaceChildren(errorBox(err));
    return undefined;
  }
}

/**
 * A horizontal bar: `value` of `max`, with its label; width set through the CSSOM (CSP allows no
 * inline style). Past 90 % of a limit it turns red; `share` bars (a part of a whole, no limit) never do.
 */
export function bar(label, value, max, text, { share: isShare = false } = {}) {
  const share = max > 0 ? Math.min(1, Math.max(0, value / max)) : 0;
  const fill = h("span", { className: "bar-fill" + (share > 0.9 && !isShare ? " hot" : "") });
  fill.style.width = `${(share * 100).toFixed(1)}%`;
  return h(
    "div",
    { className: "bar", role: "meter", "aria-label": label, "aria-valuemin": 0, "aria-valuemax": max, "aria-valuenow": value, "aria-valuetext": text },
    h("span", { className: "bar-label" }, label),
    h("span", { className: "bar-track" }, fill),
    h("span", { className: "bar-text" }, text),
  );
}

/** A ring gauge for a percentage (a conic gradient driven by a custom property). */
export function gauge(label, percent, text) {
  const ring = h("div", { className: "gauge-ring" + (percent > 85 ? " hot" : "") }, h("span", { className: "gauge-value" }, text));
  ring.style.setProperty("--p", String(Math.max(0, Math.min(100, percent))));
  return h(
    "div",
    { className: "gauge", role: "meter", "aria-label": label, "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": percent },
    ring,
    h("span", { className: "gauge-label" }, label),
  );
}

/** A secret shown once: its value, a copy button and the warning that it will not be shown again. */
export function shownOnce(title, fields) {
  return h(
    "section",
    { className: "once", "aria-label": title },
    h("h3", {}, title),
    h("p", { className: "warning", role: "note" }, "Copy it now: it is shown only once and cannot be retrieved later."),
    fields.map(([label, value]) => {
      const status = h("span", { className: "copied", "aria-live": "polite" });
      return h(
        "div",
        { className: "secret" },
        h("label", {}, label, h("input", { readonly: true, value, className: "mono", "data-secret": label })),
        h(
          "button",
          {
            type: "button",
            onclick: () =>
              navigator.clipboard?.writeText(value).then(
                () => (status.textContent = "Copied"),
                () => (status.textContent = "Select and copy"),
              ),
          },
          `Copy ${label.toLowerCase()}`,
        ),
        status,
      );
    }),
  );
}

export const fmtDate = (iso) => (iso ? new Date(iso).toLocaleString() : "—");
export const statusBadge = (status) => h("span", { className: `badge status-${status}` }, status);

/** A duration in words: "4.2 s", "3 min 20 s", "2 h 5 min". */
export function fmtDuration(ms) {
  if (!(ms >= 0)) return "—";
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.floor(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** A command to copy: shown as code, with a copy button. */
export function copyLine(text) {
  const status = h("span", { className: "copied", "aria-live": "polite" });
  const copy = () =>
    navigator.clipboard?.writeText(text).then(
      () => (status.textContent = "Copied"),
      () => (status.textContent = "Select and copy"),
    );
  return h(
    "div",
    { className: "copy-line" },
    h("code", { className: "mono" }, text),
    h("button", { type: "button", className: "link", onclick: copy }, "Copy"),
    status,
  );
}

/** A labelled form field (the input gets `id`), with an optional hint under it. */
export function field(id, label, input, hint) {
  input.id = id;
  return h("p", {}, h("label", { for: id }, label), input, hint ? h("small", { className: "muted" }, hint) : null);
}

/** A table named `label` with a header row of `columns` and `body` (a tbody the page fills). */
export function dataTable(label, columns, body) {
  return h(
    "table",
    { "aria-label": label },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        columns.map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    body,
  );
}
