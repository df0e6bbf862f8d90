/** The node↔scheduler contract's checks (lib/gpu-protocol.ts) and how refusals are logged (lib/refusal-log.ts). */
import { checkHeartbeat, checkJobEvent, EXECUTOR_KINDS, NodeHeartbeat, OUTPUT_TAIL_BYTES } from "../../lib/gpu-protocol";
import { jobEnvProblem } from "../../lib/job-spec";
import { RefusalLog } from "../../lib/refusal-log";

const card = { uuid: "GPU-1", index: 0, name: "NVIDIA GeForce RTX 3060", memoryTotal: 12288, memoryUsed: 100, utilization: 5, temperature: 50 };
const hb: NodeHeartbeat = { nodeId: "gpu-node.n1", cards: [card], runningJobIds: ["j1"], executor: "docker", at: new Date(0).toISOString() };
const ok = { jobId: "6f1c2b8e-0000-4000-8000-000000000001", nodeId: "gpu-node.n1", gpuUuid: "GPU-1", at: "2026-01-01T00:00:00Z" };

/** The field a check names, or "ok". */
const verdict = (checked: { ok: true } | { ok: false; field: string }) => (checked.ok ? "ok" : checked.field);

describe("platform - gpu protocol: heartbeat check", () => {
  test.each<[string, unknown, string]>([
    ["a proper heartbeat", hb, "ok"],
    ["a node without cards or jobs", { ...hb, cards: [], runningJobIds: [] }, "ok"],
    ...EXECUTOR_KINDS.map((executor): [string, unknown, string] => [`the ${executor} executor`, { ...hb, executor }, "ok"]),
    ["not an object", "beat", "the message"],
    ["an array", [hb], "the message"],
    ["no nodeId", { ...hb, nodeId: undefined }, "nodeId"],
    ["an empty nodeId", { ...hb, nodeId: "" }, "nodeId"],
    ["no cards list", { ...hb, cards: undefined }, "cards"],
    ["a card that is not an object", { ...hb, cards: [card, "GPU-2"] }, "cards[1]"],
    ["a card without a uuid", { ...hb, cards: [{ ...card, uuid: undefined }] }, "cards[0].uuid"],
    ["a card with a string figure", { ...hb, cards: [{ ...card, utilization: "5" }] }, "cards[0].utilization"],
    ["a card with an infinite figure", { ...hb, cards: [{ ...card, temperature: Infinity }] }, "cards[0].temperature"],
    ["no running jobs list", { ...hb, runningJobIds: undefined }, "runningJobIds"],
    ["job ids that are not strings", { ...hb, runningJobIds: [1] }, "runningJobIds"],
    ["an unknown executor", { ...hb, executor: "vm" }, "executor"],
    ["no executor", { ...hb, executor: undefined }, "executor"],
  ])("platform - gpu protocol: heartbeat, %s", (_name, payload, expected) => {
    expect(verdict(checkHeartbeat(payload))).toBe(expected);
  });

  test("platform - gpu protocol: every executor kind a node can have is one the check accepts", () => {
    // JobExecutor.kind is typed ExecutorKind: a new kind is added to EXECUTOR_KINDS, so the check knows it.
    for (const executor of EXECUTOR_KINDS) expect(checkHeartbeat({ ...hb, executor })).toEqual({ ok: true, value: { ...hb, executor } });
  });
});

describe("platform - gpu protocol: job event check", () => {
  test.each<[string, unknown, string]>([
    ["started", { type: "started", ...ok }, "ok"],
    ["finished", { type: "finished", ...ok, exitCode: 0, output: "" }, "ok"],
    ["failed without exit code", { type: "failed", ...ok, errorMessage: "x", exitCode: null, output: "" }, "ok"],
    ["cancelled", { type: "cancelled", ...ok, exitCode: 137, output: "" }, "ok"],
    ["finished with the job's start", { type: "finished", ...ok, startedAt: ok.at, exitCode: 0, output: "" }, "ok"],
    ["a bad start time", { type: "failed", ...ok, startedAt: "at some point", errorMessage: "x", exitCode: null, output: "" }, "startedAt"],
    ["not an object", "started", "the message"],
    ["a job id that is not a UUID", { type: "started", ...ok, jobId: "x" }, "jobId"],
    ["no node id", { type: "started", ...ok, nodeId: "" }, "nodeId"],
    ["no card", { type: "started", ...ok, gpuUuid: undefined }, "gpuUuid"],
    ["a bad timestamp", { type: "started", ...ok, at: "yesterday" }, "at"],
    ["an unknown type", { type: "exploded", ...ok }, "type"],
    ["failed without a message", { type: "failed", ...ok, exitCode: 1, output: "" }, "errorMessage"],
    ["finished without exit code", { type: "finished", ...ok, exitCode: null, output: "" }, "exitCode"],
    ["finished with a fractional exit code", { type: "finished", ...ok, exitCode: 1.5, output: "" }, "exitCode"],
    ["cancelled with a string exit code", { type: "cancelled", ...ok, exitCode: "137", output: "" }, "exitCode"],
    ["finished without output", { type: "finished", ...ok, exitCode: 0 }, "output"],
  ])("platform - gpu protocol: job event, %s", (_name, payload, expected) => {
    expect(verdict(checkJobEvent(payload))).toBe(expected);
  });

  test("platform - gpu protocol: a terminal event is made storable, never refused for its content", () => {
    const checked = checkJobEvent({
      type: "failed",
      ...ok,
      errorMessage: "a\u0000b",
      exitCode: 1,
      output: "x".repeat(5 * OUTPUT_TAIL_BYTES),
      outputBase64: "not base64!",
    });
    expect(checked.ok).toBe(true);
    if (!checked.ok || checked.value.type !== "failed") throw new Error("expected a failed event");
    expect(checked.value.errorMessage).toBe("a\uFFFDb");
    expect(checked.value.output).toHaveLength(4 * OUTPUT_TAIL_BYTES);
    expect(checked.value).not.toHaveProperty("outputBase64");
  });
});

describe("platform - gpu protocol: job env check", () => {
  const max = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`V${i}`, "x"]));
  test.each([
    ["empty", {}, null],
    ["64 variables, a 128-character name, a 4096-character value, an empty value", { ...max }, null],
    ["names with _ and digits", { _A1: "x", a_b: "", ["N".repeat(128)]: "v".repeat(4096) }, null],
    ["65 variables", { ...max, V64: "x" }, /at most 64/],
    ["a name starting with a digit", { "9A": "x" }, /"9A" is not allowed/],
    ["a name with a dot", { "A.B": "x" }, /not allowed/],
    ["a 129-character name", { ["N".repeat(129)]: "x" }, /at most 128/],
    ["NVIDIA_*", { NVIDIA_DRIVER_CAPABILITIES: "all" }, /set by the platform/],
    ["CUDA_*", { CUDA_VISIBLE_DEVICES: "0" }, /set by the platform/],
    ["Cuda_* in another case", { Cuda_Cache_Path: "/x" }, /set by the platform/],
    ["a number value", { A: 5 }, /string value/],
    ["a 4097-character value", { A: "v".repeat(4097) }, /longer than 4096/],
    ["an array", ["A=1"], /must be an object/],
    ["null", null, /must be an object/],
  ])("platform - gpu protocol: env %s", (_name, env, problem) => {
    const found = jobEnvProblem(env);
    if (problem === null) expect(found).toBeNull();
    else expect(found).toMatch(problem);
    // A refusal names the variable, never its value.
    if (found) expect(found).not.toMatch(/vvvv|=1|\/x/);
  });
});

describe("platform - refusal log", () => {
  const setup = () => {
    const lines: string[] = [];
    let now = 0;
    const log = new RefusalLog(
      (line) => lines.push(line),
      60_000,
      () => now,
    );
    return { lines, log, at: (ms: number) => (now = ms) };
  };

  test("platform - refusal log: a refused message names its sender and the field that failed", () => {
    const { lines, log } = setup();
    log.refused("gpu-node heartbeat", "gpu-node.n2", "executor");
    expect(lines).toEqual(["Ignored a malformed gpu-node heartbeat from gpu-node.n2: executor fails its check"]);
  });

  test("platform - refusal log: one line per sender and kind per window, then the count of those left out", () => {
    const { lines, log, at } = setup();
    for (let i = 0; i < 1000; i++) log.refused("gpu-node heartbeat", "gpu-node.n2", "cards[0].uuid");
    log.refused("job event", "gpu-node.n2", "jobId");
    log.refused("gpu-node heartbeat", "gpu-node.n3", "nodeId");
    expect(lines).toHaveLength(3);
    at(59_999);
    log.refused("gpu-node heartbeat", "gpu-node.n2", "cards[0].uuid");
    expect(lines).toHaveLength(3);
    at(60_000);
    log.refused("gpu-node heartbeat", "gpu-node.n2", "cards[0].uuid");
    expect(lines[3]).toBe("Ignored a malformed gpu-node heartbeat from gpu-node.n2: cards[0].uuid fails its check (1000 more refused since the last warning)");
  });
});
