/**
 * The gpu-node service on a broker over real NATS (process executor, simulated cards): heartbeats,
 * job events on the durable JetStream channel, cancel, input checks, durability, shutdown.
 */
import { existsSync, mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { ServiceBroker } from "moleculer";
import { HEARTBEAT_EVENT, JOB_EVENTS_CHANNEL, JobEvent, LogsPage, NodeHeartbeat } from "../../lib/gpu-protocol";
import { perSenderChannel } from "../../lib/channels";
import { NATS_URL, startTestPlatform, testBroker, TestPlatform, uniqueName, waitFor } from "../support/platform";

type Sink = { broker: ServiceBroker; events: JobEvent[]; heartbeats: NodeHeartbeat[] };

/** Another process's view: a scheduler-like broker consuming the channel and the heartbeats. */
async function startSink(namespace: string): Promise<Sink> {
  const events: JobEvent[] = [];
  const heartbeats: NodeHeartbeat[] = [];
  const broker = testBroker({ transporter: NATS_URL, namespace, nodeID: uniqueName("sink") });
  broker.createService({
    name: "sink",
    channels: { [perSenderChannel(JOB_EVENTS_CHANNEL)]: { group: "sink", handler: (event: JobEvent) => void events.push(event) } },
    events: { [HEARTBEAT_EVENT]: (hb: NodeHeartbeat) => void heartbeats.push(hb) },
  } as never);
  await broker.start();
  return { broker, events, heartbeats };
}

const eventsOf = (sink: Sink, jobId: string) => sink.events.filter((e) => e.jobId === jobId);

describe("gpu-node service over NATS", () => {
  let platform: TestPlatform;
  let logDir: string;
  const sinks: Sink[] = [];

  async function startNode(namespace?: string, extraEnv: Record<string, string> = {}): Promise<TestPlatform> {
    logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-svc-"));
    return startTestPlatform({
      services: ["gpu-node"],
      transporter: NATS_URL,
      namespace,
      env: {
        TRANSPORTER: NATS_URL, // durable channels on JetStream, as in production
        GPU_EXECUTOR: "process",
        GPU_SIMULATE: "Test GPU Large:24576,Test GPU Small:8192",
        GPU_HEARTBEAT_S: "0.2",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: logDir,
        ...extraEnv,
      },
    });
  }

  async function sink(): Promise<Sink> {
    const s = await startSink(platform.namespace);
    sinks.push(s);
    return s;
  }

  const call = <T = any>(action: string, params: unknown) => platform.broker.call<T, unknown>(`gpu-node.${action}`, params);
  const cardsOf = async (s: Sink) => (await waitFor(() => s.heartbeats.at(-1), { message: "a heartbeat" })).cards;

  afterEach(async () => {
    for (const s of sinks.splice(0)) await s.broker.stop();
    await platform?.stop();
    rmSync(logDir, { recursive: true, force: true });
  });

  test("gpu-node service - the heartbeat announces the node's cards and executor", async () => {
    platform = await startNode();
    const s = await sink();
    const hb = await waitFor(() => s.heartbeats.at(-1), { message: "a heartbeat" });
    expect(hb.nodeId).toBe(platform.broker.nodeID);
    expect(hb.executor).toBe("process");
    expect(hb.runningJobIds).toEqual([]);
    expect(hb.cards.map((c) => [c.index, c.name, c.memoryTotal])).toEqual([
      [0, "Test GPU Large", 24576],
      [1, "Test GPU Small", 8192],
    ]);
    expect(hb.cards.every((c) => c.uuid.startsWith("GPU-sim-") && c.utilization === 0)).toBe(true);
    expect(Date.parse(hb.at)).toBeGreaterThan(Date.now() - 60_000);
  });

  test("gpu-node service - a scheduler can call the node from the first heartbeat it hears", async () => {
    const namespace = uniqueName("t");
    const heartbeats: NodeHeartbeat[] = [];
    const scheduler = testBroker({ transporter: NATS_URL, namespace, nodeID: uniqueName("sched") });
    scheduler.createService({ name: "hb-sink", events: { [HEARTBEAT_EVENT]: (hb: NodeHeartbeat) => void heartbeats.push(hb) } });
    await scheduler.start();
    sinks.push({ broker: scheduler, events: [], heartbeats });
    platform = await startNode(namespace); // the node joins a running cluster
    const first = await waitFor(() => heartbeats[0], { message: "the first heartbeat" });
    const jobId = uniqueName("job");
    // No retry: the node's actions are known wherever its heartbeat is heard.
    expect(await scheduler.call("gpu-node.run", { jobId, gpuUuid: first.cards[0].uuid, command: "true" }, { nodeID: first.nodeId })).toEqual({
      accepted: true,
    });
  });

  test("gpu-node service - run reports started, then finished with exit code and output; logs serve it all", async () => {
    platform = await startNode();
    const s = await sink();
    const [card] = await cardsOf(s);
    const jobId = uniqueName("job");
    expect(await call("run", { jobId, gpuUuid: card.uuid, command: "echo hello; echo oops >&2; exit 3" })).toEqual({ accepted: true });
    await waitFor(() => eventsOf(s, jobId).length === 2, { message: "started and finished" });
    const [started, finished] = eventsOf(s, jobId);
    expect(started).toMatchObject({ type: "started", jobId, nodeId: platform.broker.nodeID, gpuUuid: card.uuid });
    expect(finished).toMatchObject({ type: "finished", jobId, gpuUuid: card.uuid, exitCode: 3, output: "hello\noops\n" });
    expect(Date.parse(finished.at)).toBeGreaterThanOrEqual(Date.parse(started.at));
    expect(await call("logs", { jobId })).toEqual({ data: Buffer.from("hello\noops\n").toString("base64"), offset: 0, nextOffset: null, totalBytes: 11 });
    await expect(call("logs", { jobId: "never-ran-here" })).rejects.toMatchObject({ code: 404, type: "NOT_FOUND" });
  });

  test("gpu-node service - a running job shows in the heartbeat on a busy card; cancel stops it", async () => {
    platform = await startNode();
    const s = await sink();
    const [, small] = await cardsOf(s);
    const jobId = uniqueName("job");
    await call("run", { jobId, gpuUuid: small.uuid, command: "echo begin; sleep 300" });
    const hb = await waitFor(() => s.heartbeats.find((h) => h.runningJobIds.includes(jobId)), { message: "a heartbeat with the job" });
    const busy = hb.cards.find((c) => c.uuid === small.uuid)!;
    expect(busy.utilization).toBeGreaterThan(0);
    expect(busy.memoryUsed).toBeGreaterThan(0);
    expect(hb.cards.find((c) => c.uuid !== small.uuid)!.utilization).toBe(0);
    // The card is taken until the job ends.
    await expect(call("run", { jobId: uniqueName("job"), gpuUuid: small.uuid, command: "true" })).rejects.toMatchObject({ type: "INVALID_STATE" });
    // The same job again is not a second run.
    expect(await call("run", { jobId, gpuUuid: small.uuid, command: "echo begin; sleep 300" })).toEqual({ accepted: true });

    await waitFor(() => eventsOf(s, jobId).some((e) => e.type === "started"), { message: "started" });
    expect(await call("cancel", { jobId })).toEqual({ stopped: true });
    const cancelled = await waitFor(() => eventsOf(s, jobId).find((e) => e.type === "cancelled"), { message: "cancelled" });
    expect(cancelled).toMatchObject({ type: "cancelled", output: "begin\n" });
    expect(eventsOf(s, jobId).map((e) => e.type)).toEqual(["started", "cancelled"]);
    await waitFor(() => s.heartbeats.at(-1)!.runningJobIds.length === 0, { message: "the card to be free" });
    expect(await call("cancel", { jobId })).toEqual({ stopped: false });
  });

  test("gpu-node service - a multi-card job takes all its cards or none, sees them all, and frees them all", async () => {
    platform = await startNode(undefined, { GPU_SIMULATE: "Test GPU:8192,Test GPU:8192,Test GPU:8192" });
    const s = await sink();
    const [c0, c1, c2] = (await cardsOf(s)).map((c) => c.uuid);
    const jobId = uniqueName("job");
    await call("run", { jobId, gpuUuid: c0, gpuUuids: [c0, c1], command: 'printf "%s" "$CUDA_VISIBLE_DEVICES"; sleep 300' });
    const hb = await waitFor(() => s.heartbeats.find((h) => h.runningJobIds.includes(jobId)), { message: "a heartbeat with the job" });
    expect(hb.cards.map((c) => c.utilization > 0)).toEqual([true, true, false]);
    // A repeated call is the same run; any card of it is taken, and a refused call takes none of its cards.
    expect(await call("run", { jobId, gpuUuid: c0, gpuUuids: [c0, c1], command: "true" })).toEqual({ accepted: true });
    await expect(call("run", { jobId: uniqueName("job"), gpuUuid: c2, gpuUuids: [c2, c1], command: "true" })).rejects.toMatchObject({
      type: "INVALID_STATE",
      message: expect.stringContaining(c1),
    });
    const refused: Array<[string, Record<string, unknown>, string]> = [
      ["the first card not gpuUuid", { gpuUuid: c2, gpuUuids: [c1, c2] }, "VALIDATION_FAILED"],
      ["a card twice", { gpuUuid: c2, gpuUuids: [c2, c2] }, "VALIDATION_FAILED"],
      ["a card of another node", { gpuUuid: c2, gpuUuids: [c2, "GPU-not-here"] }, "NOT_FOUND"],
    ];
    for (const [name, params, type] of refused)
      await expect(call("run", { jobId: uniqueName("job"), command: "true", ...params }).then(() => `accepted: ${name}`)).rejects.toMatchObject({ type });
    for (const gpuUuids of [[], Array.from({ length: 17 }, (_, i) => `GPU-${i}`), [5]])
      await expect(call("run", { jobId: uniqueName("job"), gpuUuid: c2, gpuUuids, command: "true" })).rejects.toMatchObject({ name: "ValidationError" });
    const alone = uniqueName("job");
    await call("run", { jobId: alone, gpuUuid: c2, command: "true" });
    expect(await waitFor(() => eventsOf(s, alone).find((e) => e.type === "finished"), { message: "c2 still free" })).toMatchObject({ exitCode: 0 });

    await waitFor(() => eventsOf(s, jobId).some((e) => e.type === "started"), { message: "started" });
    expect(await call("cancel", { jobId })).toEqual({ stopped: true });
    const cancelled = await waitFor(() => eventsOf(s, jobId).find((e) => e.type === "cancelled"), { message: "cancelled" });
    // Events name the first card; the process saw exactly both.
    expect(cancelled).toMatchObject({ gpuUuid: c0, output: `${c0},${c1}` });
    await waitFor(() => s.heartbeats.at(-1)!.cards.every((c) => c.utilization === 0), { message: "every card free" });
  });

  test("gpu-node service - bad calls are refused with a clear error and run nothing", async () => {
    platform = await startNode();
    const s = await sink();
    const [card] = await cardsOf(s);
    const malformed: Array<[string, Record<string, unknown>]> = [
      ["no jobId", { gpuUuid: card.uuid, command: "true" }],
      ["a jobId with a path", { jobId: "../../etc/passwd", gpuUuid: card.uuid, command: "true" }],
      ["a jobId with spaces", { jobId: "a b", gpuUuid: card.uuid, command: "true" }],
      ["no card", { jobId: "j1", command: "true" }],
      ["an empty command", { jobId: "j1", gpuUuid: card.uuid, command: "" }],
      ["a command that is not a string", { jobId: "j1", gpuUuid: card.uuid, command: ["sh", "-c", "true"] }],
      ["an image with shell characters", { jobId: "j1", gpuUuid: card.uuid, command: "true", containerImage: "busybox; rm -rf /" }],
      ["an image that is not a string", { jobId: "j1", gpuUuid: card.uuid, command: "true", containerImage: 5 }],
    ];
    for (const [name, params] of malformed) {
      await expect(call("run", params).then(() => `accepted: ${name}`)).rejects.toMatchObject({ name: "ValidationError" });
    }
    await expect(call("run", { jobId: "j1", gpuUuid: "GPU-not-here", command: "true" })).rejects.toMatchObject({ type: "NOT_FOUND" });
    await expect(call("logs", { jobId: "j1", limit: 1 })).rejects.toMatchObject({ name: "ValidationError" });
    await expect(call("cancel", {})).rejects.toMatchObject({ name: "ValidationError" });
    // Nothing started: no running job in later heartbeats, no event on the channel.
    const after = s.heartbeats.length;
    await waitFor(() => s.heartbeats.length > after + 1, { message: "two more heartbeats" });
    expect(s.heartbeats.slice(after).every((h) => h.runningJobIds.length === 0)).toBe(true);
    expect(s.events).toEqual([]);
  });

  test("gpu-node service - events published while no consumer exists are delivered later", async () => {
    platform = await startNode();
    const { node } = platform.broker.getLocalService("gpu-node") as unknown as {
      node: { events: { pending: number }; jobs: Map<string, unknown>; cards: Array<{ uuid: string }> };
    };
    const jobId = uniqueName("job");
    await call("run", { jobId, gpuUuid: node.cards[0].uuid, command: "echo while-nobody-listens; exit 5" });
    await waitFor(() => node.jobs.size === 0 && node.events.pending === 0, { message: "the job to end and its events to be stored" });
    const s = await sink(); // the scheduler comes (back) only now
    await waitFor(() => eventsOf(s, jobId).length === 2, { message: "the stored events" });
    expect(eventsOf(s, jobId).map((e) => e.type)).toEqual(["started", "finished"]);
    expect(eventsOf(s, jobId)[1]).toMatchObject({ exitCode: 5, output: "while-nobody-listens\n" });
  });

  test("gpu-node service - a stopping node fails its process jobs and still reports them", async () => {
    platform = await startNode();
    const s = await sink();
    const [card] = await cardsOf(s);
    const jobId = uniqueName("job");
    await call("run", { jobId, gpuUuid: card.uuid, command: "echo long; sleep 300" });
    await waitFor(() => eventsOf(s, jobId).length === 1, { message: "started" });
    const stopping = platform;
    platform = undefined as never;
    await stopping.stop();
    const failed = await waitFor(() => eventsOf(s, jobId).find((e) => e.type === "failed"), { message: "failed after the node stopped" });
    expect(failed).toMatchObject({ errorMessage: "The GPU node stopped while the job was running", output: "long\n" });
  });

  /** Reads a job's whole log from the node, page by page, as bytes. */
  async function wholeLog(jobId: string, limit?: number): Promise<{ bytes: Buffer; pages: number }> {
    const parts: Buffer[] = [];
    let offset: number | null = 0;
    while (offset !== null) {
      const page: LogsPage = await call("logs", { jobId, offset, limit });
      parts.push(Buffer.from(page.data, "base64"));
      offset = page.nextOffset;
    }
    return { bytes: Buffer.concat(parts), pages: parts.length };
  }

  test("gpu-node service - a job printing NUL and invalid UTF-8: readable output, exact bytes in base64 and in the log", async () => {
    platform = await startNode();
    const s = await sink();
    const [card] = await cardsOf(s);
    const jobId = uniqueName("job");
    await call("run", { jobId, gpuUuid: card.uuid, command: "printf 'a\\000b\\377c\\n'" });
    const finished = await waitFor(() => eventsOf(s, jobId).find((e) => e.type === "finished"), { message: "finished" });
    const bytes = Buffer.from([0x61, 0x00, 0x62, 0xff, 0x63, 0x0a]);
    expect(finished).toMatchObject({ exitCode: 0, output: "a\ufffdb\ufffdc\n" });
    expect(finished.type === "finished" && Buffer.from(finished.outputBase64!, "base64").equals(bytes)).toBe(true);
    expect((await wholeLog(jobId)).bytes.equals(bytes)).toBe(true);
  });

  test("gpu-node service - output over GPU_JOB_OUTPUT_MAX_MB: log capped with a complete note, the result is the true tail", async () => {
    platform = await startNode(undefined, { GPU_JOB_OUTPUT_MAX_MB: "1" });
    const s = await sink();
    const [card] = await cardsOf(s);
    const jobId = uniqueName("job");
    // 3 MiB of lines, then a last line the result must end with.
    await call("run", { jobId, gpuUuid: card.uuid, command: "yes 0123456789abcdef | head -c 3145728; echo; echo THE-REAL-LAST-LINE" });
    const finished = await waitFor(() => eventsOf(s, jobId).find((e) => e.type === "finished"), { message: "finished", timeoutMs: 30_000 });
    const omitted = 3145728 + 1 + "THE-REAL-LAST-LINE\n".length - 1024 * 1024;
    const note = `[ci-platform: output truncated: ${omitted} bytes omitted after the first 1048576 bytes`;
    expect(finished.output.startsWith(note)).toBe(true);
    expect(finished.output.endsWith("\nTHE-REAL-LAST-LINE\n")).toBe(true);
    const { bytes, pages } = await wholeLog(jobId, 64 * 1024);
    expect(pages).toBeGreaterThan(16);
    const text = bytes.toString();
    expect(bytes.length).toBeLessThan(1024 * 1024 + 1024);
    expect(text.startsWith("0123456789abcdef\n")).toBe(true);
    expect(text.endsWith(`${note} (the node's cap, GPU_JOB_OUTPUT_MAX_MB); the job result holds the last 65536 bytes]\n`)).toBe(true);
    expect(text).not.toContain("THE-REAL-LAST-LINE");
  });

  test("gpu-node service - logs beyond GPU_JOB_LOG_MAX_TOTAL_MB: the oldest finished job's log goes first", async () => {
    platform = await startNode(undefined, { GPU_JOB_LOG_MAX_TOTAL_MB: "1.5" });
    const s = await sink();
    const [card] = await cardsOf(s);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const jobId = uniqueName(`job${i}`);
      ids.push(jobId);
      await call("run", { jobId, gpuUuid: card.uuid, command: "head -c 700000 /dev/zero | tr '\\0' x" });
      await waitFor(() => eventsOf(s, jobId).some((e) => e.type === "finished"), { message: `job ${i} finished`, timeoutMs: 20_000 });
      await waitFor(() => s.heartbeats.at(-1)!.runningJobIds.length === 0, { message: "the card to be free" });
    }
    // 3 × 700 kB > 1.5 MiB: after the third, the first log is gone and the last two are kept.
    await waitFor(() => !existsSync(path.join(logDir, `${ids[0]}.log`)), { message: "the oldest log pruned" });
    await expect(call("logs", { jobId: ids[0] })).rejects.toMatchObject({ type: "NOT_FOUND" });
    for (const jobId of ids.slice(1)) expect((await wholeLog(jobId)).bytes.length).toBe(700000);
  });
});
