/**
 * A model deployment's replica on its node (issue 29): the node relays HTTP to the port the job
 * serves on inside its bubblewrap sandbox or its Docker container, both without a network, through
 * the serve folder's socket (serve-relay.ts); the folder is gone once the job ends. The replica is
 * the tests' OpenAI-compatible server (test/fixtures/deployments).
 */
import Docker from "dockerode";
import { chmodSync, existsSync, mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { PassThrough } from "stream";
import type { JobExecutor, JobLimits } from "../../services/gpu-node/job";
import { relayHost, type RelayHost } from "../../services/gpu-node/platform-access";
import { connectServe, serveDir } from "../../services/gpu-node/serve-relay";
import { replicaCommand } from "../fixtures/deployments/replica";
import { relayTestExecutor, removeContainersOf, simulatedCard } from "../support/docker";
import { uniqueName, waitFor } from "../support/platform";

/** An image with node (the test servers' own image, built locally). */
const NODE_IMAGE = process.env.TEST_PSQL_IMAGE || "ci-platform-test/servers:bookworm";
const card = simulatedCard("GPU-sim-serve-0");
const docker = new Docker();
const namespace = uniqueName("servetest");
const PORT = 8000;

/** One HTTP/1.0 exchange over the node's serve connection: the whole answer as text. */
async function exchange(dir: string, jobId: string, request: string): Promise<string> {
  const out = new PassThrough();
  const socket = await connectServe(dir, jobId, out);
  const chunks: Buffer[] = [];
  socket.on("data", (c: Buffer) => chunks.push(c));
  const ended = new Promise((resolve) => socket.once("close", resolve));
  out.end(request);
  await ended;
  return Buffer.concat(chunks).toString();
}

describe.each(["sandboxed", "docker"] as const)("gpu-node serve relay (%s)", (mode) => {
  let relayDir: string;
  let logDir: string;
  let relay: RelayHost;
  let limits: JobLimits;

  const executor = (): JobExecutor => relayTestExecutor(mode, { limits: () => limits, relay, namespace, image: NODE_IMAGE, nodeId: "node-serve", docker });

  beforeAll(() => {
    relayDir = mkdtempSync(path.join(os.tmpdir(), "serve-test-"));
    chmodSync(relayDir, 0o711); // as the node makes GPU_RELAY_DIR: the job's user passes through to its own folder
    relay = relayHost({ databasePort: 5432, databaseSslMode: "prefer", dir: relayDir });
  });
  beforeEach(() => {
    logDir = mkdtempSync(path.join(os.tmpdir(), "serve-logs-"));
    limits = { timeoutS: 60, graceS: 1, logDir };
  });
  afterEach(() => rmSync(logDir, { recursive: true, force: true }));
  afterAll(async () => {
    rmSync(relayDir, { recursive: true, force: true });
    if (mode === "docker") await removeContainersOf(docker, namespace);
  });

  test(`gpu-node serve relay (${mode}) - HTTP reaches the replica's port inside the job, which still reaches no network; the folder goes with the job`, async () => {
    const jobId = uniqueName("job");
    const probe =
      "node -e \"require('net').connect(5432, '127.0.0.1').on('error', () => console.log('no network')).on('connect', () => console.log('reached'))\"";
    const job = executor().run({ jobId, card, command: `${probe}; ${replicaCommand(PORT, { REPLICA_TAG: mode })}`, servePort: PORT });
    expect(await job.started).toBe(true);
    const models = await waitFor(
      () =>
        exchange(relayDir, jobId, "GET /v1/models HTTP/1.0\r\n\r\n").then(
          (text) => text.startsWith("HTTP/1.1 200") && text,
          () => false,
        ),
      { timeoutMs: 20_000, message: "the replica answering through its node" },
    );
    expect(models).toContain(`"id":"tiny-${mode}"`);
    const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });
    const chat = await exchange(
      relayDir,
      jobId,
      `POST /v1/chat/completions HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
    expect(chat).toContain('"content":"echo: hi"');
    // The latin1 wire (an object-mode request, as gpu-node.serve gets it): each chunk decoded as it comes.
    const wire = new PassThrough({ objectMode: true });
    const viaWire = await connectServe(relayDir, jobId, wire);
    const answered = new Promise<string>((resolve) => {
      let text = "";
      viaWire.on("data", (c: Buffer) => (text += c.toString("latin1")));
      viaWire.once("close", () => resolve(text));
    });
    wire.end("GET /v1/models HTTP/1.0\r\n\r\n");
    expect(await answered).toContain(`"id":"tiny-${mode}"`);
    // A chunk that is not bytes fails the request and closes the replica's connection.
    const bad = new PassThrough({ objectMode: true });
    const cut = await connectServe(relayDir, jobId, bad);
    const closed = new Promise((resolve) => cut.once("close", resolve));
    bad.write({ not: "bytes" });
    await closed;
    expect(bad.destroyed).toBe(true);
    await expect(connectServe(relayDir, "../escape", new PassThrough())).rejects.toThrow("No such replica");
    await job.stop("cancel");
    const outcome = await job.outcome;
    expect(outcome?.output).toContain("no network");
    expect(outcome?.output).not.toContain("reached");
    expect(existsSync(serveDir(relayDir, jobId))).toBe(false);
  });
});
