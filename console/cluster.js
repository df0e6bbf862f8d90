// Cluster: one card per GPU with utilization, memory and temperature gauges, their history (the
// server's last hour, GET /api/gpu/status/history, then the live samples added to it), and the
// queue depth, refreshed live.
import { api } from "./api.js";
import { h, guarded, gauge } from "./ui.js";
import { every } from "./live.js";

const REFRESH_MS = 3000;
/** Without the server's history (the metrics service not running): a sample per refresh, the last 3 minutes. */
const LIVE_ONLY = { bucketMs: REFRESH_MS, keep: 60, server: false };
let scale = LIVE_ONLY;
/** uuid → [{ at, util, mem }] (bucket start in ms, percents), oldest first: kept across page changes while the tab lives. */
const history = new Map();

const memPercent = (used, total) => (total > 0 ? (used / total) * 100 : 0);

/** The server's history replaces what this tab kept: it covers more, in the same buckets. */
async function loadHistory(signal) {
  try {
    const { bucketSeconds, windowSeconds, gpus } = await api("GET", "/api/gpu/status/history", undefined, signal);
    scale = { bucketMs: bucketSeconds * 1000, keep: Math.floor(windowSeconds / bucketSeconds) + 1, server: true, windowSeconds };
    for (const { uuid, samples } of gpus)
      history.set(
        uuid,
        samples.map((s) => ({ at: Date.parse(s.at), util: s.utilization, mem: memPercent(s.memoryUsed, s.memoryTotal) })),
      );
  } catch (err) {
    if (signal.aborted) throw err;
    scale = LIVE_ONLY; // 503 while the metrics service is down (or an older server): this tab's samples only
  }
}

/** A live sample goes in the bucket it falls in: a new column, or the last one updated. */
function remember(gpu) {
  const samples = history.get(gpu.uuid) ?? [];
  const now = Date.now();
  const sample = { at: now - (now % scale.bucketMs), util: gpu.utilization, mem: memPercent(gpu.memoryUsed, gpu.memoryTotal) };
  const last = samples.at(-1);
  // At or before the last bucket (this browser's clock behind the server's): it updates that one.
  if (last && sample.at <= last.at) Object.assign(last, { util: sample.util, mem: sample.mem });
  else samples.push(sample);
  history.set(gpu.uuid, samples.slice(-scale.keep));
}

/** One row of columns, a percent each (heights through the CSSOM: the CSP allows no inline style). */
function spark(label, values) {
  const now = values.at(-1) ?? 0;
  const row = h(
    "span",
    {
      className: "spark",
      role: "img",
      "aria-label": `${label} over the last ${values.length} samples: now ${Math.round(now)} %, at most ${Math.round(Math.max(0, ...values))} %`,
    },
    values.map((v) => {
      const col = h("span", { className: "col", "data-value": Math.round(v) });
      col.style.height = `${Math.max(0, Math.min(100, v)).toFixed(1)}%`;
      return col;
    }),
  );
  row.style.setProperty("--n", String(scale.keep));
  if (scale.keep > 120) row.classList.add("dense"); // no gaps: hundreds of columns fit a phone's width
  return h("span", { className: "spark-row" }, h("span", { className: "muted" }, label), row);
}

function caption() {
  if (!scale.server) return `Every ${REFRESH_MS / 1000} s while the console is open (the server keeps no history now)`;
  const span =
    scale.windowSeconds >= 3600 && scale.windowSeconds % 3600 === 0 ? `${scale.windowSeconds / 3600} h` : `${Math.round(scale.windowSeconds / 60)} min`;
  return `Every ${scale.bucketMs / 1000} s over the last ${span}, kept by the server; live while the console is open`;
}

function historyOf(gpu) {
  const samples = history.get(gpu.uuid) ?? [];
  return h(
    "figure",
    { className: "history" },
    spark(
      "Utilization",
      samples.map((s) => s.util),
    ),
    spark(
      "Memory",
      samples.map((s) => s.mem),
    ),
    h("figcaption", { className: "muted" }, caption()),
  );
}

/** A card the node only simulates (GPU_SIMULATE): its UUID says so (services/gpu-node/discovery.ts). */
const simulated = (gpu) => gpu.uuid.startsWith("GPU-sim-");

function gpuCard(gpu) {
  const memory = gpu.memoryTotal > 0 ? (gpu.memoryUsed / gpu.memoryTotal) * 100 : 0;
  return h(
    "article",
    { className: "card gpu", "aria-label": `GPU ${gpu.index} on ${gpu.nodeId}` },
    h("h3", {}, gpu.name),
    h(
      "p",
      { className: "muted" },
      `${gpu.nodeId} · #${gpu.index} · `,
      h("span", { className: gpu.available ? "badge status-completed" : "badge status-running" }, gpu.available ? "free" : "busy"),
      simulated(gpu) ? [" ", h("span", { className: "badge simulated", title: "Simulated by its node (GPU_SIMULATE): not a real card" }, "simulated")] : null,
    ),
    h(
      "div",
      { className: "gauges" },
      gauge("Utilization", gpu.utilization, `${gpu.utilization}%`),
      gauge("Memory", Math.round(memory), `${(gpu.memoryUsed / 1024).toFixed(1)}/${(gpu.memoryTotal / 1024).toFixed(1)} GiB`),
      gauge("Temperature", gpu.temperature, `${gpu.temperature}°C`),
    ),
    historyOf(gpu),
  );
}

export function clusterPage(signal) {
  const slot = h("div");
  const summary = h("div", { className: "stats" });
  const cards = h("div", { className: "gpus" });
  const loaded = loadHistory(signal);
  every(REFRESH_MS, signal, () =>
    guarded(slot, async () => {
      const [{ cluster, queueDepth }] = await Promise.all([api("GET", "/api/gpu/status", undefined, signal), loaded]);
      const stat = (label, value) =>
        h("div", { className: "stat" }, h("span", { className: "stat-value" }, String(value)), h("span", { className: "muted" }, label));
      summary.replaceChildren(
        stat("GPUs", cluster.totalGpus),
        stat("Free", cluster.availableGpus),
        stat("Busy", cluster.busyGpus),
        stat("Queue depth", queueDepth),
      );
      cluster.gpus.forEach(remember);
      cards.replaceChildren(...(cluster.gpus.length ? cluster.gpus.map(gpuCard) : [h("p", { className: "muted" }, "No GPU host has announced itself yet")]));
    }),
  );
  return h("div", {}, h("h1", {}, "Cluster"), slot, summary, cards);
}
