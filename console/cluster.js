// Cluster: one card per GPU with utilization, memory and temperature gauges, and the queue depth, refreshed live.
import { api } from "./api.js";
import { h, guarded, gauge } from "./ui.js";
import { every } from "./live.js";

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
  );
}

export function clusterPage(signal) {
  const slot = h("div");
  const summary = h("div", { className: "stats" });
  const cards = h("div", { className: "gpus" });
  every(3000, signal, () =>
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
      cards.replaceChildren(...(cluster.gpus.length ? cluster.gpus.map(gpuCard) : [h("p", { className: "muted" }, "No GPU host has announced itself yet")]));
    }),
  );
  return h("div", {}, h("h1", {}, "Cluster"), slot, summary, cards);
}
