/**
 * Attack replays (issue 19): image pulls as an SSRF / port scanner from the GPU host, the engine's
 * raw error text (a NATS banner, once) reaching the client, and job limits that overcommit the host.
 * Real gateway, scheduler, Docker engine; a listener on 127.0.0.1 stands in for NATS.
 */
import Docker from "dockerode";
import { mkdtempSync, rmSync } from "fs";
import net from "net";
import os from "os";
import path from "path";
import type { NodeCard } from "../../services/gpu-node/discovery";
import { DockerExecutor, LABEL_JOB } from "../../services/gpu-node/docker-executor";
import type { JobLimits } from "../../services/gpu-node/job";
import { DEFAULT_ALLOWED_REGISTRIES } from "../../lib/registry-policy";
import { http, spawnServices, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";
import { removeContainersOf } from "../support/docker";

const docker = new Docker();
const namespace = uniqueName("imagetest");
const card: NodeCard = {
  uuid: "GPU-sim-images-0",
  index: 0,
  name: "Image Test GPU",
  memoryTotal: 1024,
  memoryUsed: 0,
  utilization: 0,
  temperature: 30,
  simulated: true,
};
const BANNER = 'INFO {"server_id":"stand-in-nats","version":"2.9.0"}';

let connections = 0;
const sockets = new Set<net.Socket>();
let server: net.Server;
let port: number;

beforeAll(async () => {
  server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    socket.end(`${BANNER}\r\n`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  for (const socket of sockets) socket.destroy(); // the engine may hold its half open
  await new Promise((resolve) => server.close(resolve));
  await removeContainersOf(docker, namespace);
});

describe("images - POST /api/gpu/jobs refuses registries off the operator's list", () => {
  let platform: TestPlatform;
  let token: string;

  beforeAll(async () => {
    platform = await startTestPlatform({ services: ["api-gateway", "auth", "gpu-scheduler"], env: { GPU_ALLOWED_REGISTRIES: undefined } });
    await waitForRoute(platform.baseUrl, "POST", "/api/auth/register");
    const res = await http(platform.baseUrl, "POST", "/api/auth/register", {
      body: { email: `${uniqueName("img")}@example.com`, name: "Mallory", password: "correct horse battery" },
    });
    token = res.body.accessToken;
    await waitForRoute(platform.baseUrl, "GET", "/api/gpu/jobs");
  });
  afterAll(() => platform?.stop());

  test.each([
    ["a loopback registry (NATS's port)", () => `127.0.0.1:${port}/x:1`],
    ["a loopback registry by name", () => `localhost:${port}/probe:latest`],
    ["an IPv6 loopback registry", () => `[::1]:${port}/probe`],
    ["a private-network registry", () => "10.1.2.3:5000/x"],
    ["a 192.168/16 registry", () => "192.168.0.10/x"],
    ["a 172.16/12 registry", () => "172.20.0.2:443/x"],
    ["the cloud metadata address", () => "169.254.169.254/latest/meta-data"],
    ["a unique-local IPv6 registry", () => "[fd12::1]:5000/x"],
    ["a public host not on the list", () => "registry.example.com/x:1"],
  ])("images - %s is 400 VALIDATION_FAILED, creates nothing and connects nowhere", async (_name, reference) => {
    const before = connections;
    const res = await http(platform.baseUrl, "POST", "/api/gpu/jobs", { token, body: { command: "true", containerImage: reference() } });
    expect(res.status).toBe(400);
    expect(res.headers.get("x-request-id")).toBeTruthy();
    expect(res.body.error.code).toBe("VALIDATION_FAILED");
    // Bracketed IPv6 hosts already fail the reference pattern; the others reach the allow-list.
    const why =
      /not allowed: registry .* (is a loopback or private address|is not one of the operator's allowed registries)|fails to match the required pattern/;
    expect(res.body.error.details).toEqual([{ field: "containerImage", message: expect.stringMatching(why) }]);
    expect(res.text).not.toContain("stand-in");
    const list = await http(platform.baseUrl, "GET", "/api/gpu/jobs", { token });
    expect(list.body.jobs).toEqual([]);
    expect(connections).toBe(before);
  });

  test("images - an image from a default public registry is accepted (the refusals above are the list's doing)", async () => {
    const res = await http(platform.baseUrl, "POST", "/api/gpu/jobs", {
      token,
      body: { command: "true", containerImage: "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04" },
    });
    expect(res.status).toBe(201);
    expect(connections).toBe(0);
  });
});

describe("images - the node checks again before the engine sees the name", () => {
  let logDir: string;
  let limits: JobLimits;
  const executorFor = (allowedRegistries: string[]) =>
    new DockerExecutor(
      docker,
      () => ({ nodeId: "image-node", namespace, defaultImage: "unused", limits: { memoryMb: 128, cpus: 1, pids: 32, network: "none" }, allowedRegistries }),
      () => limits,
    );
  beforeEach(() => {
    logDir = mkdtempSync(path.join(os.tmpdir(), "images-"));
    limits = { timeoutS: 30, graceS: 1, logDir };
  });
  afterEach(() => rmSync(logDir, { recursive: true, force: true }));

  test("images - a loopback image reaching a node directly (scheduler bypassed) fails the job; no connection reaches the listener", async () => {
    const before = connections;
    const image = `127.0.0.1:${port}/probe:latest`;
    const job = executorFor(DEFAULT_ALLOWED_REGISTRIES).run({ jobId: uniqueName("job"), card, command: "true", containerImage: image });
    expect(await job.started).toBe(false);
    expect(await job.outcome).toMatchObject({
      type: "failed",
      exitCode: null,
      errorMessage: `Container image '${image}' is not allowed: registry 127.0.0.1:${port} is a loopback or private address; images may only come from the operator's allowed registries`,
    });
    expect(await docker.listContainers({ all: true, filters: { label: [`${LABEL_JOB}=${job.jobId}`] } })).toEqual([]);
    expect(connections).toBe(before);
  });

  test("images - what a registry host answers (a NATS banner) never reaches the job's errorMessage", async () => {
    // A test-only allow-list lets the engine go to the stand-in, as an operator's mistake would.
    const before = connections;
    const image = `127.0.0.1:${port}/x:1`;
    const outcome = await executorFor([`127.0.0.1:${port}`]).run({ jobId: uniqueName("job"), card, command: "true", containerImage: image }).outcome;
    expect(connections).toBeGreaterThan(before); // the engine did talk to it
    expect(outcome).toMatchObject({ type: "failed" });
    const message = outcome!.type === "failed" ? outcome!.errorMessage : "";
    expect(message).toMatch(
      new RegExp(
        `^Container image '${image.replace(/[.[\]]/g, "\\$&")}' could not be pulled: (its registry could not be reached|its registry did not serve it|the image does not exist in its registry, or the registry requires credentials)$`,
      ),
    );
    expect(message).not.toMatch(/INFO|stand-in|server_id/);
  });
});

describe("resources - job limits that overcommit the host", () => {
  const totalMb = Math.floor(os.totalmem() / (1024 * 1024));
  const overcommitting = {
    GPU_EXECUTOR: "process",
    GPU_SIMULATE: "Card:1024,Card:1024,Card:1024,Card:1024",
    GPU_JOB_MEMORY_MB: String(Math.ceil(totalMb / 4) + 1024),
  };

  test("resources - a node whose cards × GPU_JOB_MEMORY_MB exceed the host's memory refuses to start, saying so", async () => {
    const node = spawnServices(["gpu-node"], { ...overcommitting, LOG_LEVEL: "error" });
    const exited = await waitFor(() => (node.proc.exitCode !== null || node.proc.signalCode !== null) && { code: node.proc.exitCode }, {
      timeoutMs: 30_000,
      message: "the node to exit",
    }).catch(async (err) => {
      await node.stop("SIGKILL");
      throw err;
    });
    expect(exited.code).not.toBe(0);
    expect(node.output()).toContain(`Job limits overcommit this host: 4 card(s) × GPU_JOB_MEMORY_MB=${overcommitting.GPU_JOB_MEMORY_MB}`);
    expect(node.output()).toContain("GPU_ALLOW_OVERCOMMIT=true");
  });

  test("resources - GPU_ALLOW_OVERCOMMIT=true lets the operator start it anyway", async () => {
    const platform = await startTestPlatform({ services: ["gpu-node"], env: { ...overcommitting, GPU_ALLOW_OVERCOMMIT: "true" } });
    try {
      const { node } = platform.broker.getLocalService("gpu-node") as unknown as { node: { cards: NodeCard[]; executor?: unknown } };
      expect(node.cards).toHaveLength(4);
      expect(node.executor).toBeDefined();
    } finally {
      await platform.stop();
    }
  });
});
