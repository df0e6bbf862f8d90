// Cluster: one card per GPU with utilization, memory and temperature gauges, their history while the
// console is open, and the queue depth, refreshed live.
import { api } from "./api.js";
import { h, guarded, gauge } from "./ui.js";
import { every } from "./live.js";

const REFRESH_MS = 3000;
const KEEP = 60; // samples per card: the last 3 minutes at one every 3 s
/** uuid → [{ util, mem }] percents, oldest first: kept across page changes while the tab lives. */
const history = new Map();

function remember(gpu) {
  const samples = history.get(gpu.uuid) ?? [];
  samples.push({ util: gpu.utilization, mem: gpu.memoryTotal > 0 ? (gpu.memoryUsed / gpu.memoryTotal) * 100 : 0 });
  history.set(gpu.uuid, samples.slice(-KEEP));
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
  row.style.setProperty("--n", String(KEEP));
  return h("span", { className: "spark-row" }, h("span", { className: "muted" }, label), row);
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
    h("figcaption", { className: "muted" }, `Every ${REFRESH_MS / 1000} s while the console is open`),
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
  every(REFRESH_MS, signal, () =>
    guarded(slot, async () => {
      const { cluster, queueDepth } = await api("GET", "/api/gpu/status", undefined, signal);
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
