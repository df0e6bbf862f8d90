// Usage: this month's use of each resource against its quota, and its split by GPU type and by model.
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

function breakdown(title, map, unit) {
  const entries = Object.entries(map ?? {});
  const max = Math.max(1, ...entries.map(([, v]) => v));
  return h(
    "section",
    { className: "card" },
    h("h2", {}, title),
    entries.length ? entries.map(([k, v]) => bar(k, v, max, `${Math.round(v)} ${unit}`)) : h("p", { className: "muted" }, "Nothing this month"),
  );
}

export function usagePage(signal) {
  const slot = h("div");
  const body = h("div");
  guarded(slot, async () => {
    const [usage, { quotas }] = await Promise.all([api("GET", "/api/usage", undefined, signal), api("GET", "/api/quotas", undefined, signal)]);
    const quotaBars = quotas.map((q) => {
      const limit = q.limit ?? Math.max(q.used, 1);
      return bar(LABELS[q.resource] ?? q.resource, q.used, limit, `${Math.round(q.used * 100) / 100} / ${q.limit ?? "unlimited"}`);
    });
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
      breakdown("GPU seconds by GPU type", usage.gpu.byGpuType, "s"),
      breakdown("Tokens by model", usage.inference.byModel, "tokens"),
    );
  });
  return h("div", {}, h("h1", {}, "Usage"), slot, body);
}
