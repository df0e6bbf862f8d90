/**
 * What cards a node has: nvidia-smi's CSV when the host has an NVIDIA driver, else the cards of
 * GPU_SIMULATE (outside production a single RTX 3060 by default). Parsing is pure; running
 * nvidia-smi is a small function that finds the binary on PATH.
 */
import { execFile } from "child_process";
import { createHash } from "crypto";
import { promises as fs } from "fs";
import type { GpuCard } from "../../lib/gpu-protocol";

/** A card as the node keeps it: simulated cards have no device to hand to a container. */
export type NodeCard = GpuCard & { simulated: boolean };

export const NVIDIA_SMI_ARGS = ["--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu,temperature.gpu", "--format=csv,noheader,nounits"];

export const DEFAULT_SIMULATED = "NVIDIA GeForce RTX 3060:12288";

/** nvidia-smi prints `[N/A]`, `[Not Supported]`, … for values a card cannot report: those read as 0. */
function metric(raw: string): number {
  const value = Number(raw.trim());
  return raw.trim() === "" || !Number.isFinite(value) ? 0 : value;
}

/** Parses `nvidia-smi --query-gpu=… --format=csv,noheader,nounits` (NVIDIA_SMI_ARGS). */
export function parseNvidiaSmiCsv(text: string): GpuCard[] {
  const cards: GpuCard[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === "") continue;
    const fields = line.split(",").map((f) => f.trim());
    if (fields.length < 7) throw new Error(`Unexpected nvidia-smi line: "${line}"`);
    // A name never holds a comma today, but if one did it would sit between uuid and the 4 metrics.
    const [index, uuid] = fields;
    const [memoryTotal, memoryUsed, utilization, temperature] = fields.slice(-4).map(metric);
    const name = fields.slice(2, -4).join(", ");
    if (!/^\d+$/.test(index) || !uuid.startsWith("GPU-")) throw new Error(`Unexpected nvidia-smi line: "${line}"`);
    cards.push({ uuid, index: Number(index), name, memoryTotal, memoryUsed, utilization, temperature });
  }
  return cards;
}

export type SimulatedSpec = { name: string; memoryTotal: number };

/** Parses GPU_SIMULATE, `name:memoryMiB,…` (the name may hold spaces, not commas or colons). */
export function parseGpuSimulate(raw: string): SimulatedSpec[] {
  const specs = raw.split(",").map((part, i) => {
    const match = /^\s*([^:,]*[^:,\s])\s*:\s*(\d+)\s*$/.exec(part);
    if (!match) throw new Error(`GPU_SIMULATE entry ${i + 1} ("${part.trim()}") must read name:memoryMiB`);
    const memoryTotal = Number(match[2]);
    if (memoryTotal < 1) throw new Error(`GPU_SIMULATE entry ${i + 1} needs a memory size above 0 MiB`);
    return { name: match[1].trim(), memoryTotal };
  });
  if (specs.length === 0) throw new Error("GPU_SIMULATE lists no card");
  return specs;
}

/** Stable per node and index, shaped like a real UUID so logs and tools read it alike. */
export function simulatedUuid(nodeId: string, index: number): string {
  const hash = createHash("sha256").update(`${nodeId}:${index}`).digest("hex");
  return `GPU-sim-${hash.slice(0, 8)}-${hash.slice(8, 12)}-${hash.slice(12, 16)}-${hash.slice(16, 28)}`;
}

export function simulatedCards(nodeId: string, specs: SimulatedSpec[]): NodeCard[] {
  return specs.map((spec, index) => ({
    uuid: simulatedUuid(nodeId, index),
    index,
    name: spec.name,
    memoryTotal: spec.memoryTotal,
    ...simulatedTelemetry(spec.memoryTotal, false, 0),
    simulated: true,
  }));
}

/**
 * Plausible telemetry for a simulated card: idle cards sit cool and empty; busy ones report load
 * that moves with `tick` (so dashboards show a live card) but stays deterministic for tests.
 */
export function simulatedTelemetry(memoryTotal: number, busy: boolean, tick: number) {
  if (!busy) return { memoryUsed: 0, utilization: 0, temperature: 34 };
  const wave = (tick * 37) % 40; // 0..39
  return {
    memoryUsed: Math.round(memoryTotal * (0.3 + wave / 200)),
    utilization: 55 + wave,
    temperature: 58 + Math.round(wave / 3),
  };
}

export type NvidiaSmiResult = { kind: "cards"; cards: GpuCard[] } | { kind: "absent" } | { kind: "error"; message: string };

/** Runs nvidia-smi from PATH. `absent` when there is no binary; `error` when it runs but fails. */
export function queryNvidiaSmi(timeoutMs = 10_000): Promise<NvidiaSmiResult> {
  return new Promise((resolve) => {
    // PATH as this process sees it now (an explicit env also keeps test sandboxes honest).
    execFile("nvidia-smi", NVIDIA_SMI_ARGS, { timeout: timeoutMs, maxBuffer: 1 << 20, env: process.env }, (err, stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === "ENOENT") return resolve({ kind: "absent" });
      if (err) return resolve({ kind: "error", message: (stderr || stdout || err.message).trim().split("\n")[0] });
      try {
        resolve({ kind: "cards", cards: parseNvidiaSmiCsv(stdout) });
      } catch (parseErr) {
        resolve({ kind: "error", message: (parseErr as Error).message });
      }
    });
  });
}

export type DiscoveryOptions = {
  nodeId: string;
  simulate: string | undefined;
  production: boolean;
  query?: () => Promise<NvidiaSmiResult>;
  warn?: (message: string) => void;
};

/**
 * The node's cards: real ones when nvidia-smi lists any, else GPU_SIMULATE's, else (outside
 * production) the default simulated card. In production a host without cards is an error.
 */
export async function discoverCards(opts: DiscoveryOptions): Promise<NodeCard[]> {
  const result = await (opts.query ?? queryNvidiaSmi)();
  if (result.kind === "cards" && result.cards.length > 0) return result.cards.map((c) => ({ ...c, simulated: false }));
  const why =
    result.kind === "absent" ? "nvidia-smi is not installed" : result.kind === "error" ? `nvidia-smi failed: ${result.message}` : "nvidia-smi lists no card";
  if (opts.simulate) return simulatedCards(opts.nodeId, parseGpuSimulate(opts.simulate));
  if (opts.production) throw new Error(`No GPU found (${why}) and GPU_SIMULATE is not set`);
  opts.warn?.(`No GPU found (${why}): simulating one ${DEFAULT_SIMULATED.replace(":", " with ")} MiB (set GPU_SIMULATE to change)`);
  return simulatedCards(opts.nodeId, parseGpuSimulate(DEFAULT_SIMULATED));
}

/** The driver's per-card files: `GPU UUID: GPU-…` and `Device Minor: N` (its /dev/nvidiaN). */
export const NVIDIA_PROC_GPUS = "/proc/driver/nvidia/gpus";

/** Parses one `/proc/driver/nvidia/gpus/<bus id>/information` file. */
export function parseGpuInformation(text: string): { uuid: string; minor: number } | null {
  const uuid = /^GPU UUID:\s*(\S+)/m.exec(text)?.[1];
  const minor = Number(/^Device Minor:\s*(\d+)/m.exec(text)?.[1]);
  return uuid && Number.isInteger(minor) ? { uuid, minor } : null;
}

/**
 * The minor number of a card's device node (/dev/nvidia<minor>), read from the driver; nvidia-smi's
 * index when the driver does not say (the two agree on most hosts, not on all).
 */
export async function gpuDeviceMinor(card: GpuCard, root = NVIDIA_PROC_GPUS): Promise<number> {
  for (const bus of await fs.readdir(root).catch(() => [] as string[])) {
    const info = parseGpuInformation(await fs.readFile(`${root}/${bus}/information`, "utf8").catch(() => ""));
    if (info?.uuid === card.uuid) return info.minor;
  }
  return card.index;
}

/** Live values for the real ones of `cards`, in place; a failing nvidia-smi keeps the last ones (and says so). */
export async function refreshTelemetry(cards: NodeCard[], warn: (message: string) => void): Promise<void> {
  if (cards.every((c) => c.simulated)) return;
  const result = await queryNvidiaSmi();
  if (result.kind !== "cards") {
    warn(`GPU telemetry not refreshed: ${result.kind === "error" ? result.message : "nvidia-smi is gone"}`);
    return;
  }
  for (const fresh of result.cards) {
    const card = cards.find((c) => c.uuid === fresh.uuid);
    if (card) Object.assign(card, { memoryUsed: fresh.memoryUsed, utilization: fresh.utilization, temperature: fresh.temperature });
  }
}
