/**
 * Model deployments (issue 29) as operators run the platform: the gateway, gpu-scheduler and
 * inference each in its own Node process over real NATS; auth, usage and a gpu-node on the Docker
 * executor (one simulated card) in this one. The replica is a real container of the servers' test
 * image with no network, running the tests' OpenAI-compatible server, reached gateway → inference →
 * its node's serve relay → the container. Then, mid-way, gpu-scheduler stops while a stream is under
 * way (it finishes; requests are still answered), the gateway and inference stop too, and all three
 * start again: the deployment serves on with the same replica (none added, no cold start), and the
 * new inference process still makes the idle scale-down.
 */
import Docker from "dockerode";
import { mkdtempSync } from "fs";
import os from "os";
import path from "path";
import OpenAI from "openai";
import { LABEL_NAMESPACE } from "../../services/gpu-node/docker-executor";
import { replicaCommand } from "../fixtures/deployments/replica";
import { removeContainersOf } from "../support/docker";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";
import { ChildService, http, uniqueName } from "../support/platform";

/** An image with node (the test servers' own image, built locally). */
const NODE_IMAGE = process.env.TEST_PSQL_IMAGE || "ci-platform-test/servers:bookworm";
const PORT = 8000;
const docker = new Docker();

describe("model deployments - a Docker replica, and restarts of gateway, scheduler and inference", () => {
  const namespace = uniqueName("deploy");
  const work = mkdtempSync(path.join(os.tmpdir(), "deployments-nats-"));
  let platform: NatsPlatform;
  let token: string;
  let id: string;
  const processes: Record<string, ChildService> = {};
  const client = () => new OpenAI({ baseURL: `${platform.baseUrl}/v1`, apiKey: token, maxRetries: 0 });
  const ask = (content: string) =>
    client()
      .chat.completions.create({ model: "dock", messages: [{ role: "user", content }] })
      .withResponse();
  const deployment = async () => (await http(platform.baseUrl, "GET", `/api/deployments/${id}`, { token })).body;
  const replicas = async () =>
    (await http(platform.baseUrl, "GET", `/api/gpu/jobs?deploymentId=${id}`, { token })).body.jobs as Array<{ id: string; status: string }>;
  const own = (service: string, generation = 1) => ({ services: [service], env: { NODE_ID: `${namespace}-${service}-${generation}` } });
  /** Throws with what the gateway answered (the wait's message then says it), unless 200. */
  const answers200 = async (urlPath: string) => {
    const res = await http(platform.baseUrl, "GET", urlPath, { token });
    if (res.status !== 200) throw new Error(`GET ${urlPath}: ${res.status} ${res.text.slice(0, 200)}`);
    return res;
  };
  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    await docker.getImage(NODE_IMAGE).inspect(); // never skipped: without the image this fails
    platform = await startNatsPlatform({
      namespace,
      work,
      env: { JWT_SECRET: `jwt-${namespace}`, OLLAMA_URL: "off", DEPLOYMENTS_TICK_MS: "200", GPU_SCHEDULE_TICK_MS: "200" },
      processes: [own("api-gateway"), own("gpu-scheduler"), own("inference")],
      local: ["auth", "usage", "gpu-node"],
      localEnv: {
        GPU_EXECUTOR: "docker",
        GPU_DEFAULT_IMAGE: NODE_IMAGE,
        GPU_ALLOWED_REGISTRIES: "docker.io", // the local image reads as docker.io
        GPU_SIMULATE: "Deploy Test GPU:1024",
        GPU_JOB_MEMORY_MB: "256",
        GPU_HEARTBEAT_S: "0.5",
        GPU_STOP_GRACE_S: "1",
        GPU_JOB_LOG_DIR: path.join(work, "logs"),
        GPU_RELAY_DIR: path.join(work, "relay"),
      },
      ready: (p) =>
        p.waitFor(
          async () => {
            const res = await http(p.baseUrl, "POST", "/api/auth/register", {
              body: { email: `${uniqueName("u")}@example.com`, name: "Deployer", password: "password-123" },
            }).catch(() => undefined);
            if (res?.status !== 201) return false;
            token = res.body.accessToken;
            const routed = await http(p.baseUrl, "GET", "/api/deployments", { token });
            return routed.status === 200 && (await http(p.baseUrl, "GET", "/api/gpu/status", { token })).body?.cluster?.totalGpus === 1;
          },
          { timeoutMs: 90_000, intervalMs: 250, message: "gateway, scheduler, inference and node to see each other" },
        ),
    });
    [processes["api-gateway"], processes["gpu-scheduler"], processes["inference"]] = platform.children;
  }, 120_000);

  afterAll(async () => {
    await platform?.stop();
    await removeContainersOf(docker, namespace);
  });

  test("deployments - a Docker replica without a network serves chat and a stream through gateway, inference and its node", async () => {
    const made = await http(platform.baseUrl, "POST", "/api/deployments", {
      token,
      body: { name: "dock", command: replicaCommand(PORT, { REPLICA_TAG: "d", CHUNK_DELAY_MS: "50" }), containerImage: NODE_IMAGE, port: PORT },
    });
    expect(made.status).toBe(201);
    id = made.body.id;

    const first = await ask("hello container");
    expect([first.response.headers.get("x-ci-cold-start"), first.data.choices[0].message.content]).toEqual(["true", "echo: hello container"]);
    const warm = await ask("model?");
    expect(warm.response.headers.get("x-ci-cold-start")).toBeNull();
    expect(warm.data.choices[0].message.content).toMatch(/^model: tiny-d server: /);
    const stream = await client().chat.completions.create({ model: "dock", stream: true, messages: [{ role: "user", content: "a b c" }] });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("echo: a b c");

    // The replica is a container of the image, on no network at all.
    const [job] = await replicas();
    expect(job.status).toBe("running");
    const containers = await docker.listContainers({ filters: { label: [`${LABEL_NAMESPACE}=${namespace}`] } });
    expect(containers).toHaveLength(1);
    const inspected = await docker.getContainer(containers[0].Id).inspect();
    const networks = Object.keys(inspected.NetworkSettings.Networks ?? {}).filter((n) => n !== "none");
    expect([inspected.Config.Image, inspected.HostConfig.NetworkMode, networks]).toEqual([NODE_IMAGE, "none", []]);
  }, 90_000);

  test("deployments - restarting gpu-scheduler, the gateway and inference mid-way: it keeps serving on the same replica; idle, it still scales to zero", async () => {
    const [replica] = await replicas();
    expect(replica.status).toBe("running");

    // A stream under way while gpu-scheduler stops: it finishes (the scheduler is not on the request's path).
    const stream = await client().chat.completions.create({
      model: "dock",
      stream: true,
      messages: [{ role: "user", content: "one two three four five six" }],
    });
    const it = stream[Symbol.asyncIterator]();
    let text = (await it.next()).value?.choices[0]?.delta?.content ?? "";
    await processes["gpu-scheduler"].stop("SIGTERM");
    for (let next = await it.next(); !next.done; next = await it.next()) text += next.value.choices[0]?.delta?.content ?? "";
    expect(text).toBe("echo: one two three four five six");
    // Without a scheduler the deployment still answers.
    expect((await ask("no scheduler")).data.choices[0].message.content).toBe("echo: no scheduler");

    // The gateway and inference go too; all three start again side by side (one wait, not three).
    await Promise.all([processes["api-gateway"].stop("SIGTERM"), processes.inference.stop("SIGTERM")]);
    for (const service of ["gpu-scheduler", "api-gateway", "inference"]) processes[service] = platform.spawn(own(service, 2).services, own(service, 2).env);
    await platform.waitFor(() => answers200("/api/deployments"), {
      timeoutMs: 90_000,
      intervalMs: 250,
      message: "the gateway and inference back",
    });
    await platform.waitFor(async () => (await replicas().catch(() => []))[0]?.status === "running", { timeoutMs: 60_000, message: "the scheduler back" });
    const after = await ask("after the restarts");
    expect([after.response.headers.get("x-ci-cold-start"), after.data.choices[0].message.content]).toEqual([null, "echo: after the restarts"]);

    // The same replica throughout: none replaced, none added.
    expect((await replicas()).map((j) => [j.id, j.status])).toEqual([[replica.id, "running"]]);
    expect(await deployment()).toMatchObject({ status: "ready", replicas: { desired: 1, ready: 1, starting: 0 } });

    // The new inference process decides on what the old ones wrote down: idle for idleTimeoutSeconds, down to zero.
    expect((await http(platform.baseUrl, "PATCH", `/api/deployments/${id}`, { token, body: { idleTimeoutSeconds: 10 } })).status).toBe(200);
    await platform.waitFor(
      async () => {
        const d = await deployment();
        return d.status === "idle" && d.replicas.desired === 0 && (await replicas()).every((j) => j.status === "cancelled");
      },
      { timeoutMs: 30_000, intervalMs: 500, message: "the replica stopped once idle" },
    );
  }, 150_000);
});
