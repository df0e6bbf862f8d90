/**
 * The Docker executor's /out volumes prepared ahead of the jobs (out-volumes.ts), on the real
 * engine: a node's later jobs get one, their /out is writable and kept complete by the time the
 * outcome is reported, an untouched /out is not archived (and no job can pass for untouched), a
 * pruned one is not used, a restarted node removes only its own unused ones, and a job leaves no
 * connection to the engine open.
 */
import Docker from "dockerode";
import { execFileSync } from "child_process";
import { existsSync, mkdtempSync, rmSync } from "fs";
import http from "http";
import os from "os";
import path from "path";
import { artifactPath } from "../../services/gpu-node/artifacts";
import { DockerExecutor, LABEL_JOB, LABEL_NAMESPACE, LABEL_NODE, OUT_VOLUME_PREFIX } from "../../services/gpu-node/docker-executor";
import type { JobLimits } from "../../services/gpu-node/job";
import { uniqueName, waitFor } from "../support/platform";
import { removeContainersOf, requireEngineAndImage, simulatedCard, TEST_JOB_IMAGE, volumeExists } from "../support/docker";

const READY_PREFIX = `${OUT_VOLUME_PREFIX}ready-`;

describe("gpu-node docker /out volumes prepared ahead", () => {
  const docker = new Docker();
  const namespace = uniqueName("outvolumes");
  const card = simulatedCard("GPU-sim-out-volumes");
  let logDir: string;
  const limits = (): JobLimits => ({ timeoutS: 30, graceS: 1, logDir, outMaxBytes: 1024 * 1024 });
  const executorFor = (nodeId: string, engine = docker) =>
    new DockerExecutor(
      engine,
      () => ({
        nodeId,
        namespace,
        defaultImage: TEST_JOB_IMAGE,
        limits: { memoryMb: 256, cpus: 1, pids: 64, network: "none" },
        allowedRegistries: ["docker.io"],
      }),
      limits,
    );
  const readyVolumes = async (nodeId: string) =>
    ((await docker.listVolumes({ filters: { label: [`${LABEL_NAMESPACE}=${namespace}`, `${LABEL_NODE}=${nodeId}`] } })).Volumes ?? [])
      .map((v) => v.Name)
      .filter((name) => name.startsWith(READY_PREFIX))
      .sort();
  /** The /out volume of a job's container while it runs. */
  const outVolumeOf = async (jobId: string) => {
    const [summary] = await waitFor(
      async () => {
        const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL_JOB}=${jobId}`] } });
        return list.length ? list : false;
      },
      { message: "the job's container" },
    );
    const info = await docker.getContainer(summary.Id).inspect();
    return info.Mounts.filter((m) => m.Destination === "/out").map((m) => m.Name!);
  };
  /** A node that has run one job, with its volumes prepared ahead. */
  const warmNode = async (nodeId: string) => {
    const executor = executorFor(nodeId);
    expect(await executor.run({ jobId: uniqueName("job"), card, command: "true" }).outcome).toMatchObject({ type: "finished", exitCode: 0 });
    await executor.preparedAhead();
    expect(await readyVolumes(nodeId)).toHaveLength(2);
    return executor;
  };

  beforeAll(() => requireEngineAndImage(docker));
  beforeEach(() => {
    logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-out-volumes-"));
  });
  afterEach(() => rmSync(logDir, { recursive: true, force: true }));
  afterAll(() => removeContainersOf(docker, namespace));

  test("gpu-node docker /out volumes - a later job gets one: writable by the job, its files kept when the outcome is reported, the volume removed", async () => {
    const nodeId = uniqueName("node");
    const executor = await warmNode(nodeId);
    const ready = await readyVolumes(nodeId);
    const job = executor.run({ jobId: uniqueName("job"), card, command: "sleep 1; id -u; echo later > /out/result.txt; mkdir /out/d; echo x > /out/d/y" });
    const [volume] = await outVolumeOf(job.jobId);
    expect(ready).toContain(volume);
    expect(await job.outcome).toMatchObject({ type: "finished", exitCode: 0, output: "65534\n" });
    // Read at once: the archive is complete before the outcome is reported.
    const tar = artifactPath(logDir, job.jobId);
    expect(execFileSync("tar", ["-tf", tar], { encoding: "utf8" }).trim().split("\n").sort()).toEqual(["out/", "out/d/", "out/d/y", "out/result.txt"]);
    expect(execFileSync("tar", ["-xOf", tar, "out/result.txt"], { encoding: "utf8" })).toBe("later\n");
    expect(await volumeExists(docker, volume)).toBe(false);
    await executor.preparedAhead();
    expect(await readyVolumes(nodeId)).toHaveLength(2); // the one taken, prepared again
    // The node stops: none is left behind.
    await executor.release();
    expect(await readyVolumes(nodeId)).toEqual([]);
  });

  test("gpu-node docker /out volumes - an untouched /out keeps no tar; a job cannot pass for untouched by setting /out's time", async () => {
    const executor = await warmNode(uniqueName("node"));
    const untouched = executor.run({ jobId: uniqueName("job"), card, command: "echo nothing" });
    expect(await untouched.outcome).toEqual({ type: "finished", exitCode: 0, output: "nothing\n" });
    // Only the owner (root) may set a time of its choosing: the job is refused, its file is kept.
    const forging = executor.run({
      jobId: uniqueName("job"),
      card,
      command: "echo hidden > /out/f; touch -d @86400 /out/f; touch -d @86400 /out 2>/dev/null || echo refused",
    });
    expect(await forging.outcome).toEqual({ type: "finished", exitCode: 0, output: "refused\n" });
    expect(execFileSync("tar", ["-xOf", artifactPath(logDir, forging.jobId), "out/f"], { encoding: "utf8" })).toBe("hidden\n");
    // Touched but left empty: read, and nothing to keep.
    const emptied = executor.run({ jobId: uniqueName("job"), card, command: "echo x > /out/gone; rm /out/gone" });
    expect(await emptied.outcome).toEqual({ type: "finished", exitCode: 0, output: "" });
    for (const job of [untouched, emptied]) expect(existsSync(artifactPath(logDir, job.jobId))).toBe(false);
  });

  test("gpu-node docker /out volumes - jobs that ended leave no connection to the engine open", async () => {
    // The engine's answers go through this agent, keeping connections alive as Node's global agent does: a
    // request whose answer is never read to its end keeps its socket in use for good.
    const agent = new http.Agent({ keepAlive: true });
    // docker-modem takes an `agent`; @types/dockerode does not list it.
    const counted = new Docker({ agent } as Docker.DockerOptions);
    const executor = executorFor(uniqueName("node"), counted);
    for (const command of ["echo kept > /out/f", "echo nothing"]) {
      expect(await executor.run({ jobId: uniqueName("job"), card, command }).outcome).toMatchObject({ type: "finished", exitCode: 0 });
    }
    await executor.preparedAhead();
    const open = () => Object.values(agent.sockets).flat().length;
    await waitFor(() => open() === 0, { timeoutMs: 3000, message: `no socket left in use (${open()} in use)` });
    await executor.release();
    agent.destroy();
  });

  test("gpu-node docker /out volumes - one removed meanwhile (docker volume prune) is not used: the job prepares its own", async () => {
    const nodeId = uniqueName("node");
    const executor = await warmNode(nodeId);
    for (const name of await readyVolumes(nodeId)) await docker.getVolume(name).remove();
    const job = executor.run({ jobId: uniqueName("job"), card, command: "echo own > /out/own.txt" });
    const [volume] = await outVolumeOf(job.jobId);
    expect(volume.startsWith(READY_PREFIX)).toBe(false);
    expect(await job.outcome).toMatchObject({ type: "finished", exitCode: 0 });
    expect(execFileSync("tar", ["-xOf", artifactPath(logDir, job.jobId), "out/own.txt"], { encoding: "utf8" })).toBe("own\n");
  });

  test("gpu-node docker /out volumes - a restarted node removes its own unused ones, never another node's", async () => {
    const [crashed, busy] = [uniqueName("node"), uniqueName("node")];
    await warmNode(crashed);
    await warmNode(busy);
    const theirs = await readyVolumes(busy);
    expect(await executorFor(crashed).adopt([])).toEqual([]);
    expect(await readyVolumes(crashed)).toEqual([]);
    expect(await readyVolumes(busy)).toEqual(theirs);
  });
});
