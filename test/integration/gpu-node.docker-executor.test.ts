/**
 * The Docker executor against the real engine, with the image `.ci/setup.d/20-docker.sh` builds
 * locally (no registry). Containers run with networking off. A missing engine fails these tests.
 */
import Docker from "dockerode";
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { HEARTBEAT_EVENT, JOB_EVENTS_CHANNEL, JobEvent, NodeHeartbeat, OUTPUT_TAIL_BYTES } from "../../lib/gpu-protocol";
import { perSenderChannel } from "../../lib/channels";
import type { NodeCard } from "../../services/gpu-node/discovery";
import { ContainerContext, DockerExecutor, LABEL_JOB, LABEL_NAMESPACE, LABEL_NODE, LABEL_OUT_OF, outVolumeName } from "../../services/gpu-node/docker-executor";
import type { JobLimits, RunningJob } from "../../services/gpu-node/job";
import { readLogPage } from "../../services/gpu-node/log-store";
import { NATS_URL, startTestPlatform, testBroker, TestPlatform, uniqueName, waitFor } from "../support/platform";
import { removeContainersOf, simulatedCard, TEST_JOB_IMAGE, volumeExists } from "../support/docker";

const docker = new Docker();
const simulated = simulatedCard("GPU-sim-docker-0");

describe("gpu-node docker executor", () => {
  const namespace = uniqueName("dockertest");
  let logDir: string;
  let limits: JobLimits;
  let context: ContainerContext;
  const executorFor = (nodeId = "node-a", d: Docker = docker) =>
    new DockerExecutor(
      d,
      () => ({ ...context, nodeId }),
      () => limits,
    );
  const run = (command: string, extra: { containerImage?: string; card?: NodeCard; executor?: DockerExecutor } = {}) =>
    (extra.executor ?? executorFor()).run({ jobId: uniqueName("job"), card: extra.card ?? simulated, command, containerImage: extra.containerImage });
  const containersOf = (jobId: string) => docker.listContainers({ all: true, filters: { label: [`${LABEL_JOB}=${jobId}`] } });

  beforeAll(async () => {
    // Never skipped: without an engine (or the image) this fails, as it does in CI.
    await docker.ping();
    await docker.getImage(TEST_JOB_IMAGE).inspect();
  });

  beforeEach(() => {
    logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-docker-"));
    limits = { timeoutS: 30, graceS: 1, logDir };
    // The local test image reads as docker.io; 127.0.0.1:9 is a test-only registry (nothing listens there).
    context = {
      nodeId: "node-a",
      namespace,
      defaultImage: TEST_JOB_IMAGE,
      limits: { memoryMb: 256, cpus: 1, pids: 64, network: "none" },
      allowedRegistries: ["docker.io", "127.0.0.1:9"],
    };
  });

  afterEach(() => rmSync(logDir, { recursive: true, force: true }));

  afterAll(async () => {
    await removeContainersOf(docker, namespace);
  });

  test("gpu-node docker executor - output in the order written and the exit code; the container is removed", async () => {
    const job = run("echo one; echo two >&2; echo three; exit 7");
    expect(await job.started).toBe(true);
    expect(await job.outcome).toEqual({ type: "finished", exitCode: 7, output: "one\ntwo\nthree\n" });
    expect((await readLogPage(logDir, job.jobId))!.text).toBe("one\ntwo\nthree\n");
    expect(await containersOf(job.jobId)).toEqual([]);
  });

  test("gpu-node docker executor - inside the container: nobody, no capabilities, no new privileges, read-only, no network", async () => {
    const outcome = await run(
      "id -u; id -g; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; touch /x 2>/dev/null || echo root-read-only; echo ok > /tmp/w && cat /tmp/w; ls /sys/class/net",
    ).outcome;
    expect(outcome).toMatchObject({ type: "finished", exitCode: 0 });
    const lines = outcome!.output.trim().split("\n");
    expect(lines).toEqual(["65534", "65534", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "root-read-only", "ok", "lo"]);
  });

  test("gpu-node docker executor - /dev/shm is a tmpfs of GPU_JOB_SHM_MB", async () => {
    context.limits.shmMb = 96;
    const outcome = await run("stat -f -c '%b %S' /dev/shm").outcome;
    expect(outcome).toMatchObject({ type: "finished", exitCode: 0 });
    const [blocks, blockSize] = outcome!.output.trim().split(" ").map(Number);
    expect(blocks * blockSize).toBe(96 * 1024 * 1024);
  });

  test("gpu-node docker executor - docker inspect shows the hardening; cancel stops the running container", async () => {
    const job = run("echo ready; sleep 300");
    expect(await job.started).toBe(true);
    const [summary] = await waitFor(
      async () => {
        const list = await containersOf(job.jobId);
        return list.length ? list : false;
      },
      { message: "the job's container" },
    );
    const info = await docker.getContainer(summary.Id).inspect();
    expect(info.State.Running).toBe(true);
    expect(info.Config.User).toBe("65534:65534");
    expect(info.Config.Env.some((e) => e.startsWith("NVIDIA_"))).toBe(false);
    const host = info.HostConfig;
    expect(host.Privileged).toBe(false);
    expect(host.CapDrop).toEqual(["ALL"]);
    expect(host.CapAdd ?? []).toEqual([]);
    expect(host.SecurityOpt).toEqual(["no-new-privileges"]);
    expect(host.NetworkMode).toBe("none");
    expect(host.PidsLimit).toBe(64);
    expect(host.Memory).toBe(256 * 1024 * 1024);
    expect(host.NanoCpus).toBe(1e9);
    expect(host.ReadonlyRootfs).toBe(true);
    expect(host.Binds ?? []).toEqual([]);
    // No host path; one volume, the job's own /out (outVolumeName), removed with the container.
    expect(info.Mounts.filter((m) => m.Type === "bind")).toEqual([]);
    expect(info.Mounts.filter((m) => m.Type === "volume").map((m) => [m.Name, m.Destination, m.RW])).toEqual([[outVolumeName(job.jobId), "/out", true]]);
    expect(host.DeviceRequests ?? []).toEqual([]); // simulated card: no device
    expect(host.AutoRemove).toBe(false);

    expect(await job.stop("cancel")).toBe(true);
    const outcome = await job.outcome;
    expect(outcome).toMatchObject({ type: "cancelled", output: "ready\n" });
    expect([137, 143]).toContain(outcome!.exitCode);
    expect(await containersOf(job.jobId)).toEqual([]);
  });

  test("gpu-node docker executor - the time limit stops and fails the job", async () => {
    limits = { ...limits, timeoutS: 1 };
    const job = run("echo working; sleep 300");
    const outcome = await job.outcome;
    expect(outcome).toMatchObject({ type: "failed", errorMessage: "Job exceeded the time limit of 1 s", output: "working\n" });
    expect(await containersOf(job.jobId)).toEqual([]);
  });

  test("gpu-node docker executor - a job's own time limit beats the node's, and a restarted node that adopts it keeps it", async () => {
    const before = executorFor("node-t");
    const job = before.run({ jobId: uniqueName("job"), card: simulated, command: "echo adopted-slow; sleep 300", timeoutS: 3 });
    expect(await job.started).toBe(true);
    job.detach(); // the node stops; the container goes on
    expect(await job.outcome).toBeNull();
    // The restarted node's own limit (30 s) is not this job's: it stops at 3 s from its real start.
    const [adopted] = await executorFor("node-t").adopt([simulated.uuid]);
    expect(adopted.jobId).toBe(job.jobId);
    expect(await adopted.outcome).toMatchObject({ type: "failed", errorMessage: "Job exceeded the time limit of 3 s", output: "adopted-slow\n" });
    expect(await containersOf(job.jobId)).toEqual([]);
  });

  test("gpu-node docker executor - the pids limit holds a fork bomb", async () => {
    // Builtins only (read, [, echo): once the limit is hit nothing can fork. cgroup v1 or v2 path.
    const probe = "for f in /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max; do [ -r $f ] && { read m < $f; echo max $m; }; done";
    const outcome = await run(`${probe}; while :; do sleep 30 & done`).outcome;
    expect(outcome).toMatchObject({ type: "finished" });
    expect(outcome!.output.split("\n")[0]).toBe("max 64");
    expect(outcome?.type === "finished" && outcome.exitCode).not.toBe(0); // the shell died on a refused fork
  });

  test("gpu-node docker executor - a missing image fails the job cleanly, with one pull for jobs sharing it", async () => {
    // A registry on loopback that does not exist: the pull fails without leaving the machine.
    const image = `127.0.0.1:9/ci-platform/missing-${uniqueName("img")}:1`;
    let pulls = 0;
    const counting = Object.create(docker) as Docker;
    counting.pull = ((...args: Parameters<Docker["pull"]>) => {
      pulls++;
      return docker.pull(...args);
    }) as Docker["pull"];
    const executor = executorFor("node-a", counting);
    const jobs = [
      run("true", { containerImage: image, executor }),
      run("true", { containerImage: image, card: { ...simulated, uuid: "GPU-sim-docker-1" }, executor }),
    ];
    // One asking after the first pull failed gets the same answer, from the failed pull remembered.
    await jobs[0].outcome;
    jobs.push(run("true", { containerImage: image, card: { ...simulated, uuid: "GPU-sim-docker-2" }, executor }));
    for (const job of jobs) {
      expect(await job.started).toBe(false);
      const outcome = await job.outcome;
      expect(outcome).toMatchObject({ type: "failed", exitCode: null });
      expect(outcome!.type === "failed" && outcome!.errorMessage).toBe(`Container image '${image}' could not be pulled: its registry could not be reached`);
      expect(await containersOf(job.jobId)).toEqual([]);
    }
    expect(pulls).toBe(1);
  });

  test("gpu-node docker executor - a real card on a host without the NVIDIA runtime fails with a clear message", async () => {
    const real: NodeCard = { ...simulated, uuid: "GPU-2b9e4c7d-81a6-3f05-c7d2-5e0a91b4f368", simulated: false };
    const job = run("true", { card: real });
    expect(await job.started).toBe(false);
    const outcome = await job.outcome;
    expect(outcome?.type === "failed" && outcome.errorMessage).toMatch(/^The job's container could not be (created|started): .*nvidia/i);
    expect(await containersOf(job.jobId)).toEqual([]);
  });

  test("gpu-node docker executor - output beyond 64 KiB: the tail in the outcome, everything in the log", async () => {
    const job = run("yes 0123456789abcdef | head -c 200000; echo; echo END");
    const outcome = await job.outcome;
    expect(outcome).toMatchObject({ type: "finished", exitCode: 0 });
    expect(Buffer.byteLength(outcome!.output)).toBe(OUTPUT_TAIL_BYTES);
    expect(outcome!.output.endsWith("\nEND\n")).toBe(true);
    const first = await readLogPage(logDir, job.jobId);
    expect(first!.totalBytes).toBe(200_000 + "\nEND\n".length);
    expect(first!.text.startsWith("0123456789abcdef\n0123456789abcdef\n")).toBe(true);
  });

  test("gpu-node docker executor - a restarted node adopts what it left: running jobs and ones that ended meanwhile", async () => {
    const before = executorFor("node-r");
    const running = run("echo adopted-running; sleep 300", { executor: before });
    const ended = run("echo ended-while-away; exit 4", { executor: before, card: { ...simulated, uuid: "GPU-sim-docker-1" } });
    expect(await running.started).toBe(true);
    expect(await ended.started).toBe(true);
    // The node goes away (SIGTERM): it lets go of its containers without stopping them.
    running.detach();
    ended.detach();
    expect(await running.outcome).toBeNull();
    await waitFor(
      async () => {
        const [c] = await containersOf(ended.jobId);
        return c?.State === "exited";
      },
      // The engine's own pace: under load (another suite's containers, image builds beside it) it took
      // over 10 s, once over 30 s.
      { timeoutMs: 90_000, message: "the second job to end while no node watches" },
    );
    // Another node id on the same engine adopts nothing of node-r's (its cards differ too).
    expect(await executorFor("node-other").adopt(["GPU-sim-unrelated"])).toEqual([]);

    const adopted = await executorFor("node-r").adopt([simulated.uuid]);
    const byId = new Map<string, RunningJob>(adopted.map((j) => [j.jobId, j]));
    expect([...byId.keys()].sort()).toEqual([running.jobId, ended.jobId].sort());
    expect(await byId.get(ended.jobId)!.outcome).toEqual({ type: "finished", exitCode: 4, output: "ended-while-away\n" });
    const again = byId.get(running.jobId)!;
    expect(await again.started).toBe(true);
    expect(again.gpuUuid).toBe(simulated.uuid);
    expect(await again.stop("cancel")).toBe(true);
    expect(await again.outcome).toMatchObject({ type: "cancelled", output: "adopted-running\n" });
    expect(await containersOf(running.jobId)).toEqual([]);
    expect(await containersOf(ended.jobId)).toEqual([]);
  }, 150_000);

  test("gpu-node docker executor - a restarted node removes what a crash left: its /out helpers and /out volumes no container uses", async () => {
    const containerExists = (id: string) =>
      docker
        .getContainer(id)
        .inspect()
        .then(
          () => true,
          () => false,
        );
    // A helper as prepareOut makes it (never started), holding its job's volume.
    const helper = (nodeId: string, jobId: string) =>
      docker.createContainer({
        Image: TEST_JOB_IMAGE,
        Entrypoint: ["/ci-platform-never-started"],
        Labels: { [LABEL_NAMESPACE]: namespace, [LABEL_NODE]: nodeId, [LABEL_OUT_OF]: jobId },
        NetworkDisabled: true,
        HostConfig: { NetworkMode: "none", Mounts: [{ Type: "volume", Source: outVolumeName(jobId), Target: "/out" }] },
      });
    const [cleaned, helped, others] = [uniqueName("job"), uniqueName("job"), uniqueName("job")];
    await docker.createVolume({ Name: outVolumeName(cleaned) }); // its job's container was removed, then the node died
    const mine = await helper("node-crashed", helped); // the node died inside prepareOut
    const theirs = await helper("node-busy", others); // another node on the engine, preparing a job now
    try {
      expect(await executorFor("node-crashed").adopt([])).toEqual([]);
      expect(await containerExists(mine.id)).toBe(false);
      expect(await volumeExists(docker, outVolumeName(cleaned))).toBe(false);
      expect(await volumeExists(docker, outVolumeName(helped))).toBe(false); // free once its helper went
      expect(await containerExists(theirs.id)).toBe(true);
      expect(await volumeExists(docker, outVolumeName(others))).toBe(true);
    } finally {
      await theirs.remove({ force: true }).catch(() => undefined);
      for (const job of [cleaned, helped, others])
        await docker
          .getVolume(outVolumeName(job))
          .remove()
          .catch(() => undefined);
    }
  });

  test("gpu-node docker executor - the service restarts with the same node id, reports the adopted job and cancels it", async () => {
    const nodeID = uniqueName("gpu-host");
    const env = {
      TRANSPORTER: NATS_URL,
      GPU_EXECUTOR: "docker",
      GPU_DEFAULT_IMAGE: TEST_JOB_IMAGE,
      GPU_HEARTBEAT_S: "0.2",
      GPU_STOP_GRACE_S: "1",
      GPU_JOB_LOG_DIR: logDir,
      GPU_JOB_MEMORY_MB: "256",
      GPU_SIMULATE: "Docker Test GPU:1024",
    };
    const first = await startTestPlatform({ services: ["gpu-node"], transporter: NATS_URL, nodeID, env });
    const events: JobEvent[] = [];
    const heartbeats: NodeHeartbeat[] = [];
    const sink = testBroker({ transporter: NATS_URL, namespace: first.namespace, nodeID: uniqueName("sink") });
    sink.createService({
      name: "sink",
      channels: { [perSenderChannel(JOB_EVENTS_CHANNEL)]: { group: "sink", handler: (e: JobEvent) => void events.push(e) } },
      events: { [HEARTBEAT_EVENT]: (hb: NodeHeartbeat) => void heartbeats.push(hb) },
    } as never);
    await sink.start();
    let second: TestPlatform | undefined;
    try {
      const [card] = (await waitFor(() => heartbeats.at(-1), { message: "a heartbeat" })).cards;
      expect(heartbeats.at(-1)!.executor).toBe("docker");
      const jobId = uniqueName("job");
      await first.broker.call("gpu-node.run", { jobId, gpuUuid: card.uuid, command: "echo survivor; sleep 300" });
      const firstStart = await waitFor(() => events.find((e) => e.jobId === jobId && e.type === "started"), { message: "started" });
      await first.stop(); // as on SIGTERM: the container keeps running
      expect((await containersOf(jobId)).map((c) => c.State)).toEqual(["running"]);
      const seen = heartbeats.length;

      second = await startTestPlatform({ services: ["gpu-node"], transporter: NATS_URL, nodeID, namespace: first.namespace, env });
      const hb = await waitFor(() => heartbeats.slice(seen).find((h) => h.runningJobIds.includes(jobId)), { message: "the adopted job in a heartbeat" });
      expect(hb.cards.map((c) => c.uuid)).toEqual([card.uuid]); // same node id, same simulated card
      expect(await second.broker.call("gpu-node.cancel", { jobId })).toEqual({ stopped: true });
      const cancelled = await waitFor(() => events.find((e) => e.jobId === jobId && e.type === "cancelled"), { message: "cancelled" });
      expect(cancelled).toMatchObject({ type: "cancelled", output: "survivor\n" });
      // The adopted job's start is its container's (Docker's State.StartedAt), not the adoption's:
      // no later than the first report, which was stamped once start() had returned.
      const again = events.filter((e) => e.jobId === jobId && e.type === "started").at(-1)!;
      expect(again).not.toBe(firstStart);
      expect(Date.parse(again.at)).toBeLessThanOrEqual(Date.parse(firstStart.at));
      expect(Date.parse(firstStart.at) - Date.parse(again.at)).toBeLessThan(1000);
      expect(cancelled.type === "cancelled" && cancelled.startedAt).toBe(again.at);
      expect(await containersOf(jobId)).toEqual([]);
    } finally {
      await sink.stop();
      await second?.stop();
    }
  });
});
