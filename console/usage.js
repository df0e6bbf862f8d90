// Usage: this month's use of each resource against its quota, per day, and its split by GPU type and by model.
import { api } from "./api.js";
import { h, guarded, bar } from "./ui.js";

const LABELS = {
  credits: "Credits",
  gpuSeconds: "GPU seconds",
  tokens: "Tokens",
  databases: "Databases",
  storageMb: "Storage (MB)",
  runningGpus: "Running GPUs",
  queuedJobs: "Queued jobs",
};

/** What the daily charts show of one day's usage: title, unit and the value. */
const SERIES = [
  ["GPU seconds", "s", (u) => u.gpu.gpuSeconds],
  ["Tokens", "tokens", (u) => u.inference.tokens],
  ["Storage", "MB-hours", (u) => u.databases.storageMbHours],
  ["Credits", "credits", (u) => u.credits],
];
/** Day windows asked for at once. */
const DAY_CALLS = 6;

const fmt = (n) => (Math.round(n * 100) / 100).toLocaleString();

/**
 * Each UTC day of `now`'s month so far, as the [from, to) window GET /api/usage takes (the API's
 * month is the UTC calendar month); today's ends now. `to` equals `from` in the first instant of a day.
 */
export function daysOfMonth(now = new Date()) {
  const [year, month] = [now.getUTCFullYear(), now.getUTCMonth()];
  return Array.from({ length: now.getUTCDate() }, (_, i) => {
    const from = new Date(Date.UTC(year, month, i + 1));
    const next = new Date(Date.UTC(year, month, i + 2));
    return { day: i + 1, from, to: next < now ? next : now };
  });
}

/** `fn` over `items`, at most `width` at a time, in order. */
async function mapLimited(items, width, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i]);
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return out;
}

/** One column per day (heights set through the CSSOM: the CSP allows no inline style), the total in the caption. */
function dailyChart(title, unit, days, values) {
  const max = Math.max(0, ...values);
  const total = values.reduce((a, b) => a + b, 0);
  const month = days[0].from.toLocaleString("en", { month: "short", timeZone: "UTC" });
  const columns = h(
    "div",
    { className: "columns", role: "img", "aria-label": `${title} per day: ${fmt(total)} ${unit} this month, at most ${fmt(max)} on one day` },
    days.map(({ day }, i) => {
      const col = h("span", { className: "col", title: `${month} ${day}: ${fmt(values[i])} ${unit}`, "data-day": day, "data-value": values[i] });
      // A day with any use shows at least a sliver.
      col.style.height = max > 0 && values[i] > 0 ? `${Math.max(2, (values[i] / max) * 100).toFixed(1)}%` : "0";
      return h("span", { className: "col-slot" }, col);
    }),
  );
  const axis = h(
    "div",
    { className: "axis muted", "aria-hidden": "true" },
    days.map(({ day }) => h("span", {}, day === 1 || day % 7 === 1 ? String(day) : "")),
  );
  for (const grid of [columns, axis]) grid.style.setProperty("--days", String(days.length));
  return h(
    "figure",
    { className: "card chart" },
    h("figcaption", {}, h("h2", {}, `${title} per day`), h("span", { className: "muted" }, `${fmt(total)} ${unit}`)),
    columns,
    axis,
  );
}

/** The month's usage day by day: one GET /api/usage per day (a window of a day is one cheap read). */
async function dailyCharts(signal) {
  const days = daysOfMonth();
  const zero = { gpu: { gpuSeconds: 0 }, inference: { tokens: 0 }, databases: { storageMbHours: 0 }, credits: 0 };
  const usage = await mapLimited(days, DAY_CALLS, ({ from, to }) =>
    to > from ? api("GET", `/api/usage?from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(to.toISOString())}`, undefined, signal) : zero,
  );
  return h(
    "div",
    { className: "charts" },
    SERIES.map(([title, unit, value]) =>
      dailyChart(
        title,
        unit,
        days,
        usage.map((u) => value(u)),
      ),
    ),
  );
}

function breakdown(title, map, unit) {
  const entries = Object.entries(map ?? {});
  const max = Math.max(1, ...entries.map(([, v]) => v));
  return h(
    "section",
    { className: "card" },
    h("h2", {}, title),
    entries.length
      ? entries.map(([k, v]) => bar(k, v, max, `${Math.round(v)} ${unit}`, { share: true }))
      : h("p", { className: "muted" }, "Nothing this month"),
  );
}

export function usagePage(signal) {
  const slot = h("div");
  const body = h("div");
  const daily = h("div");
  const dailySlot = h("div");
  guarded(slot, async () => {
    const [usage, { quotas }] = await Promise.all([api("GET", "/api/usage", undefined, signal), api("GET", "/api/quotas", undefined, signal)]);
    // An unlimited quota has nothing to fill: its track stays empty and says so (a full red bar would read as "at the limit").
    const quotaBars = quotas.map((q) =>
      q.limit === null
        ? bar(LABELS[q.resource] ?? q.resource, 0, 1, `${fmt(q.used)} · no limit`)
        : bar(LABELS[q.resource] ?? q.resource, q.used, q.limit, `${fmt(q.used)} / ${fmt(q.limit)}`),
    );
    body.replaceChildren(
      h("p", { className: "muted" }, `${new Date(usage.from).toLocaleDateString()} – ${new Date(usage.to).toLocaleString()} · ${usage.credits} credits`),
      h("section", { className: "card" }, h("h2", {}, "This month against your quotas"), quotaBars),
      h(
        "div",
        { className: "stats" },
        [
          ["GPU jobs", usage.gpu.jobs],
          ["GPU seconds", Math.round(usage.gpu.gpuSeconds)],
          ["Inference requests", usage.inference.requests],
          ["Tokens", usage.inference.tokens],
          ["Databases", usage.databases.active],
          ["Storage MB-hours", Math.round(usage.databases.storageMbHours)],
        ].map(([k, v]) => h("div", { className: "stat" }, h("span", { className: "stat-value" }, String(v)), h("span", { className: "muted" }, k))),
      ),
      daily,
      breakdown("GPU seconds by GPU type", usage.gpu.byGpuType, "s"),
      breakdown("Tokens by model", usage.inference.byModel, "tokens"),
    );
  });
  // The charts come on their own: a slow or failed day read leaves the totals above in place.
  guarded(dailySlot, async () => daily.replaceChildren(await dailyCharts(signal)));
  return h("div", {}, h("h1", {}, "Usage"), slot, body, dailySlot);
}
