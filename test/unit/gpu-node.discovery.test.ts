import { readFileSync } from "fs";
import path from "path";
import {
  discoverCards,
  NvidiaSmiResult,
  parseGpuSimulate,
  parseNvidiaSmiCsv,
  simulatedCards,
  simulatedTelemetry,
  simulatedUuid,
} from "../../services/gpu-node/discovery";

const fixture = (name: string) => readFileSync(path.join(__dirname, "../fixtures/nvidia-smi", name), "utf8");

describe("gpu-node discovery - nvidia-smi CSV", () => {
  test("gpu-node discovery - one card", () => {
    expect(parseNvidiaSmiCsv(fixture("single-rtx3060.csv"))).toEqual([
      {
        index: 0,
        uuid: "GPU-2b9e4c7d-81a6-3f05-c7d2-5e0a91b4f368",
        name: "NVIDIA GeForce RTX 3060",
        memoryTotal: 12288,
        memoryUsed: 1,
        utilization: 0,
        temperature: 38,
      },
    ]);
  });

  test("gpu-node discovery - several cards keep their order and live values", () => {
    const cards = parseNvidiaSmiCsv(fixture("multi-a100.csv"));
    expect(cards.map((c) => c.index)).toEqual([0, 1, 2, 3]);
    expect(new Set(cards.map((c) => c.uuid)).size).toBe(4);
    expect(cards[1]).toMatchObject({ name: "NVIDIA A100-SXM4-80GB", memoryTotal: 81920, memoryUsed: 73412, utilization: 98, temperature: 67 });
  });

  test("gpu-node discovery - [N/A] and [Not Supported] read as 0", () => {
    const [geforce, grid] = parseNvidiaSmiCsv(fixture("na-values.csv"));
    expect(geforce).toMatchObject({ name: "GeForce GTX 1660 Ti", memoryUsed: 412, utilization: 0, temperature: 47 });
    expect(grid).toMatchObject({ name: "GRID T4-16Q", memoryTotal: 16384, utilization: 0, temperature: 0 });
  });

  test("gpu-node discovery - names with spaces, CRLF line ends", () => {
    expect(parseNvidiaSmiCsv(fixture("names-with-spaces.csv")).map((c) => c.name)).toEqual([
      "Quadro RTX 8000",
      "NVIDIA H100 80GB HBM3",
      "NVIDIA GeForce RTX 4090 Laptop GPU",
    ]);
  });

  test.each([
    ["empty output", "", 0],
    ["blank lines only", "\n\n", 0],
  ])("gpu-node discovery - %s lists no card", (_name, text, count) => {
    expect(parseNvidiaSmiCsv(text)).toHaveLength(count);
  });

  test.each([
    ["too few fields", "0, GPU-abc, Tesla T4, 15360"],
    ["an error message instead of CSV", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."],
    ["no GPU- uuid", "0, 1234, Tesla T4, 15360, 0, 0, 30"],
  ])("gpu-node discovery - %s is rejected", (_name, text) => {
    expect(() => parseNvidiaSmiCsv(text)).toThrow(/Unexpected nvidia-smi line/);
  });
});

describe("gpu-node discovery - GPU_SIMULATE", () => {
  test.each([
    ["one card", "NVIDIA GeForce RTX 3060:12288", [{ name: "NVIDIA GeForce RTX 3060", memoryTotal: 12288 }]],
    [
      "two cards with spaces around",
      " NVIDIA A100 80GB : 81920 , Tesla T4:15360",
      [
        { name: "NVIDIA A100 80GB", memoryTotal: 81920 },
        { name: "Tesla T4", memoryTotal: 15360 },
      ],
    ],
  ])("gpu-node discovery - %s", (_name, raw, expected) => {
    expect(parseGpuSimulate(raw)).toEqual(expected);
  });

  test.each([
    ["no memory", "RTX 3060"],
    ["memory not a number", "RTX 3060:12GB"],
    ["empty name", ":12288"],
    ["zero memory", "RTX 3060:0"],
    ["negative memory", "RTX 3060:-1"],
    ["an empty entry", "RTX 3060:12288,,"],
    ["empty string", ""],
  ])("gpu-node discovery - invalid GPU_SIMULATE: %s", (_name, raw) => {
    expect(() => parseGpuSimulate(raw)).toThrow(/GPU_SIMULATE/);
  });

  test("gpu-node discovery - simulated UUIDs are stable per node and index, and distinct", () => {
    expect(simulatedUuid("node-a", 0)).toBe(simulatedUuid("node-a", 0));
    expect(simulatedUuid("node-a", 0)).not.toBe(simulatedUuid("node-a", 1));
    expect(simulatedUuid("node-a", 0)).not.toBe(simulatedUuid("node-b", 0));
    expect(simulatedUuid("node-a", 0)).toMatch(/^GPU-sim-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  });

  test("gpu-node discovery - simulated cards are idle and cool until busy", () => {
    const [card] = simulatedCards("n", [{ name: "RTX", memoryTotal: 12288 }]);
    expect(card).toMatchObject({ index: 0, simulated: true, utilization: 0, memoryUsed: 0 });
    for (let tick = 0; tick < 20; tick++) {
      const busy = simulatedTelemetry(12288, true, tick);
      expect(busy.utilization).toBeGreaterThan(0);
      expect(busy.utilization).toBeLessThanOrEqual(100);
      expect(busy.memoryUsed).toBeGreaterThan(0);
      expect(busy.memoryUsed).toBeLessThan(12288);
      expect(busy.temperature).toBeGreaterThan(card.temperature);
    }
  });
});

describe("gpu-node discovery - choosing real or simulated cards", () => {
  const answer = (result: NvidiaSmiResult) => async () => result;
  const realCard = { index: 0, uuid: "GPU-1", name: "Tesla T4", memoryTotal: 15360, memoryUsed: 0, utilization: 0, temperature: 30 };

  test.each<[string, NvidiaSmiResult, string | undefined, boolean, string]>([
    ["real cards win over GPU_SIMULATE", { kind: "cards", cards: [realCard] }, "Sim:100", false, "Tesla T4"],
    ["absent nvidia-smi uses GPU_SIMULATE", { kind: "absent" }, "Sim:100", true, "Sim"],
    ["failing nvidia-smi uses GPU_SIMULATE", { kind: "error", message: "driver" }, "Sim:100", false, "Sim"],
    ["no card listed outside production: default card", { kind: "cards", cards: [] }, undefined, false, "NVIDIA GeForce RTX 3060"],
    ["absent outside production: default card", { kind: "absent" }, undefined, false, "NVIDIA GeForce RTX 3060"],
  ])("gpu-node discovery - %s", async (_name, result, simulate, production, expectedName) => {
    const warnings: string[] = [];
    const cards = await discoverCards({ nodeId: "n1", simulate, production, query: answer(result), warn: (m) => warnings.push(m) });
    expect(cards.map((c) => c.name)).toEqual([expectedName]);
    expect(cards[0].simulated).toBe(result.kind !== "cards" || result.cards.length === 0);
    expect(warnings.length).toBe(simulate === undefined && !cards[0].simulated ? 0 : simulate === undefined ? 1 : 0);
  });

  test("gpu-node discovery - production without cards or GPU_SIMULATE refuses to start", async () => {
    await expect(discoverCards({ nodeId: "n1", simulate: undefined, production: true, query: answer({ kind: "absent" }) })).rejects.toThrow(
      /No GPU found \(nvidia-smi is not installed\) and GPU_SIMULATE is not set/,
    );
  });
});
