/**
 * Discovery through a fake `nvidia-smi` placed on PATH (this machine has no NVIDIA driver): the
 * service announces the cards it lists, refreshes their telemetry, and falls back to simulated
 * cards when nvidia-smi fails.
 */
import { chmodSync, copyFileSync, mkdtempSync, rmSync, writeFileSync } from "fs";
import os from "os";
import path from "path";
import { HEARTBEAT_EVENT, NodeHeartbeat } from "../../lib/gpu-protocol";
import { NVIDIA_SMI_ARGS, queryNvidiaSmi } from "../../services/gpu-node/discovery";
import { createBroker } from "../../moleculer.config";
import { startTestPlatform, testEnv, TestPlatform, waitFor } from "../support/platform";

const FIXTURES = path.join(__dirname, "../fixtures/nvidia-smi");

/** Writes an `nvidia-smi` that checks it was asked our query and prints `data` (or fails like a driverless host). */
function fakeNvidiaSmi(dir: string, mode: "ok" | "driver-error"): string {
  const data = path.join(dir, "data.csv");
  const script =
    mode === "ok"
      ? `#!/bin/sh\n[ "$*" = "${NVIDIA_SMI_ARGS.join(" ")}" ] || { echo "unexpected arguments: $*" >&2; exit 2; }\ncat "${data}"\n`
      : `#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."\nexit 9\n`;
  writeFileSync(path.join(dir, "nvidia-smi"), script);
  chmodSync(path.join(dir, "nvidia-smi"), 0o755);
  return data;
}

describe("gpu-node discovery with nvidia-smi", () => {
  let dir: string;
  let platform: TestPlatform | undefined;
  const savedPath = process.env.PATH;

  beforeEach(() => (dir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-smi-"))));
  afterEach(async () => {
    await platform?.stop();
    platform = undefined;
    process.env.PATH = savedPath;
    rmSync(dir, { recursive: true, force: true });
  });

  async function startNode(env: Record<string, string>) {
    process.env.PATH = `${dir}:${savedPath}`; // discovery runs nvidia-smi from the process's PATH (restored after each test)
    platform = await startTestPlatform({
      services: ["gpu-node"],
      env: { GPU_EXECUTOR: "process", GPU_HEARTBEAT_S: "0.1", GPU_TELEMETRY_S: "0.1", GPU_JOB_LOG_DIR: dir, GPU_SIMULATE: undefined, ...env },
    });
    const heartbeats: NodeHeartbeat[] = [];
    platform.broker.createService({ name: "hb-sink", events: { [HEARTBEAT_EVENT]: (hb: NodeHeartbeat) => void heartbeats.push(hb) } });
    await platform.broker.waitForServices(["hb-sink"]);
    return { heartbeats };
  }

  test("gpu-node discovery - queryNvidiaSmi runs the binary on PATH with our query", async () => {
    copyFileSync(path.join(FIXTURES, "multi-a100.csv"), fakeNvidiaSmi(dir, "ok"));
    process.env.PATH = `${dir}:${savedPath}`;
    const result = await queryNvidiaSmi();
    expect(result.kind).toBe("cards");
    expect(result.kind === "cards" && result.cards.map((c) => c.index)).toEqual([0, 1, 2, 3]);
    process.env.PATH = "/nonexistent";
    expect(await queryNvidiaSmi()).toEqual({ kind: "absent" });
  });

  test("gpu-node discovery - the node announces the cards nvidia-smi lists and refreshes their telemetry", async () => {
    const data = fakeNvidiaSmi(dir, "ok");
    copyFileSync(path.join(FIXTURES, "names-with-spaces.csv"), data);
    const { heartbeats } = await startNode({ GPU_SIMULATE: "Never Used:1" }); // real cards win over GPU_SIMULATE
    const first = await waitFor(() => heartbeats[0], { message: "a heartbeat" });
    expect(first.cards.map((c) => c.name)).toEqual(["Quadro RTX 8000", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090 Laptop GPU"]);
    expect(first.cards[1]).toEqual({
      index: 1,
      uuid: "GPU-9d4e8f20-6a13-4b7c-a2e5-38f1c0d7b946",
      name: "NVIDIA H100 80GB HBM3",
      memoryTotal: 81559,
      memoryUsed: 0,
      utilization: 0,
      temperature: 27,
    });
    // The card gets busy: the next refreshes report it.
    writeFileSync(data, "1, GPU-9d4e8f20-6a13-4b7c-a2e5-38f1c0d7b946, NVIDIA H100 80GB HBM3, 81559, 60123, 97, 71\n");
    const busy = await waitFor(() => heartbeats.find((h) => h.cards[1].utilization === 97), { message: "refreshed telemetry" });
    expect(busy.cards[1]).toMatchObject({ memoryUsed: 60123, temperature: 71 });
    expect(busy.cards).toHaveLength(3); // a card missing from one refresh keeps its place
  });

  test("gpu-node discovery - a job on a real card sees it in CUDA_VISIBLE_DEVICES", async () => {
    copyFileSync(path.join(FIXTURES, "single-rtx3060.csv"), fakeNvidiaSmi(dir, "ok"));
    await startNode({});
    const uuid = "GPU-2b9e4c7d-81a6-3f05-c7d2-5e0a91b4f368";
    const { node } = platform!.broker.getLocalService("gpu-node") as unknown as { node: { jobs: Map<string, { outcome: Promise<unknown> }> } };
    await platform!.broker.call("gpu-node.run", { jobId: "cuda-env", gpuUuid: uuid, command: 'echo "$CUDA_VISIBLE_DEVICES"' });
    expect(await node.jobs.get("cuda-env")!.outcome).toEqual({ type: "finished", exitCode: 0, output: `${uuid}\n` });
  });

  test.each([
    ["a failing nvidia-smi uses GPU_SIMULATE", "driver-error", { GPU_SIMULATE: "Sim Card:2048" }, "Sim Card"],
    ["a failing nvidia-smi without GPU_SIMULATE simulates the default card", "driver-error", {}, "NVIDIA GeForce RTX 3060"],
  ] as const)("gpu-node discovery - %s", async (_name, mode, env, expected) => {
    fakeNvidiaSmi(dir, mode);
    const { heartbeats } = await startNode(env as Record<string, string>);
    const hb = await waitFor(() => heartbeats[0], { message: "a heartbeat" });
    expect(hb.cards.map((c) => c.name)).toEqual([expected]);
    expect(hb.cards[0].uuid).toMatch(/^GPU-sim-/);
  });

  test("gpu-node discovery - in production a host without cards or GPU_SIMULATE does not start", async () => {
    fakeNvidiaSmi(dir, "driver-error");
    process.env.PATH = `${dir}:${savedPath}`; // where discovery finds nvidia-smi
    const broker = createBroker(["gpu-node"], { nodeID: "production-node" }, testEnv({ NODE_ENV: "production", LOG_LEVEL: "fatal", GPU_SIMULATE: undefined }));
    try {
      await expect(broker.start()).rejects.toThrow(/No GPU found \(nvidia-smi failed: NVIDIA-SMI has failed.*\) and GPU_SIMULATE is not set/);
    } finally {
      await broker.stop().catch(() => undefined);
    }
  });
});
