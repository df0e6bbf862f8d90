/**
 * bench:docker-executor — what the Docker executor adds to starting a job container, against a
 * bare `docker run` of the same image in the same run, alternating so both see the same engine:
 * - start: until the container runs (executor `started` vs `docker run -d`);
 * - round trip: a trivial job from request to exit code, output and removal (executor outcome vs
 *   `docker run --rm`).
 * Goal: the executor ≤ 1.2× the bare `docker run`. Also shown: the raw engine API doing the same
 * (create, start, wait, logs, remove; no hardening, no log file), to show the executor's own cost
 * apart from the CLI's. Containers run with networking off.
 * `benchDockerExecutor()` is exported for bench:scheduler; run alone with `npm run bench:docker-executor`.
 */
import { execFile } from "child_process";
import Docker from "dockerode";
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { promisify } from "util";
import type { NodeCard } from "../services/gpu-node/discovery";
import { DockerExecutor, LABEL_NAMESPACE } from "../services/gpu-node/docker-executor";
import { removeContainersOf } from "../test/support/docker";

const exec = promisify(execFile);

export type Timing = { median: number; p90: number; mean: number };
/** `ratio`: executor / docker run (the goal); `apiRatio`: executor / the same calls without hardening or capture. */
export type Measure = { executor: Timing; dockerRun: Timing; rawApi: Timing; ratio: number; apiRatio: number };
export type DockerExecutorFigures = { runs: number; image: string; start: Measure; roundTrip: Measure };

function summarize(ms: number[]): Timing {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { median: at(0.5), p90: at(0.9), mean: ms.reduce((a, b) => a + b, 0) / ms.length };
}

const round = (n: number) => Math.round(n * 10) / 10;

export async function benchDockerExecutor(opts: { runs?: number; image?: string } = {}): Promise<DockerExecutorFigures> {
  const runs = opts.runs ?? 15;
  const image = opts.image ?? process.env.TEST_JOB_IMAGE ?? "ci-platform/test-busybox:latest";
  const docker = new Docker();
  await docker.getImage(image).inspect(); // fail early: .ci/setup.d/20-docker.sh builds it
  const namespace = `bench-${process.pid}`;
  const logDir = mkdtempSync(path.join(os.tmpdir(), "bench-docker-"));
  const executor = new DockerExecutor(
    docker,
    () => ({
      nodeId: "bench",
      namespace,
      defaultImage: image,
      limits: { memoryMb: 256, cpus: 1, pids: 64, network: "none" },
      allowedRegistries: ["docker.io"],
    }),
    () => ({ timeoutS: 60, graceS: 0, logDir }), // stop = SIGKILL at once: the stop is not measured
  );
  const card: NodeCard = {
    uuid: "GPU-sim-bench",
    index: 0,
    name: "Bench GPU",
    memoryTotal: 1024,
    memoryUsed: 0,
    utilization: 0,
    temperature: 30,
    simulated: true,
  };
  const times = {
    startExec: [] as number[],
    startRun: [] as number[],
    startApi: [] as number[],
    tripExec: [] as number[],
    tripRun: [] as number[],
    tripApi: [] as number[],
  };
  const rawCreate = (cmd: string) =>
    docker.createContainer({ Image: image, Cmd: ["sh", "-c", cmd], Labels: { [LABEL_NAMESPACE]: namespace }, HostConfig: { NetworkMode: "none" } });
  let seq = 0;

  const executorStart = async () => {
    const t0 = performance.now();
    const job = executor.run({ jobId: `bench-start-${process.pid}-${seq++}`, card, command: "sleep 30" });
    if (!(await job.started)) throw new Error("executor job did not start");
    const ms = performance.now() - t0;
    await job.stop("cancel");
    await job.outcome;
    return ms;
  };
  const dockerRunStart = async () => {
    const t0 = performance.now();
    const { stdout } = await exec("docker", ["run", "-d", "--network", "none", "--label", `${LABEL_NAMESPACE}=${namespace}`, image, "sh", "-c", "sleep 30"]);
    const ms = performance.now() - t0;
    await exec("docker", ["rm", "-f", stdout.trim()]);
    return ms;
  };
  const rawApiStart = async () => {
    const t0 = performance.now();
    const container = await rawCreate("sleep 30");
    await container.start();
    const ms = performance.now() - t0;
    await container.remove({ force: true });
    return ms;
  };
  const rawApiTrip = async () => {
    const t0 = performance.now();
    const container = await rawCreate("echo ok");
    await container.start();
    await container.wait();
    const logs = await container.logs({ stdout: true, stderr: true, follow: false });
    await container.remove({ force: true });
    if (!logs.subarray(8).equals(Buffer.from("ok\n"))) throw new Error("unexpected raw API output");
    return performance.now() - t0;
  };
  const executorTrip = async () => {
    const t0 = performance.now();
    const outcome = await executor.run({ jobId: `bench-trip-${process.pid}-${seq++}`, card, command: "echo ok" }).outcome;
    if (outcome?.type !== "finished" || outcome.output !== "ok\n") throw new Error(`unexpected outcome ${JSON.stringify(outcome)}`);
    return performance.now() - t0;
  };
  const dockerRunTrip = async () => {
    const t0 = performance.now();
    const { stdout } = await exec("docker", ["run", "--rm", "--network", "none", image, "sh", "-c", "echo ok"]);
    if (stdout !== "ok\n") throw new Error(`unexpected docker run output ${JSON.stringify(stdout)}`);
    return performance.now() - t0;
  };

  try {
    for (let i = 0; i < 2; i++) await executorTrip().then(dockerRunTrip); // warm-up
    for (let i = 0; i < runs; i++) {
      // Alternate which goes first so neither always meets a warmer engine.
      const pairs: Array<[() => Promise<number>, number[]]> = [
        [executorStart, times.startExec],
        [dockerRunStart, times.startRun],
        [rawApiStart, times.startApi],
        [executorTrip, times.tripExec],
        [dockerRunTrip, times.tripRun],
        [rawApiTrip, times.tripApi],
      ];
      if (i % 2) pairs.reverse();
      for (const [measure, into] of pairs) into.push(await measure());
    }
  } finally {
    await removeContainersOf(docker, namespace);
    rmSync(logDir, { recursive: true, force: true });
  }

  const measure = (executorMs: number[], runMs: number[], apiMs: number[]): Measure => {
    const [e, r, a] = [summarize(executorMs), summarize(runMs), summarize(apiMs)];
    return { executor: e, dockerRun: r, rawApi: a, ratio: e.median / r.median, apiRatio: e.median / a.median };
  };
  return {
    runs,
    image,
    start: measure(times.startExec, times.startRun, times.startApi),
    roundTrip: measure(times.tripExec, times.tripRun, times.tripApi),
  };
}

export function printDockerExecutorFigures(f: DockerExecutorFigures): void {
  console.log(`\nDocker executor vs bare docker run (${f.image}, ${f.runs} runs each, alternating)\n`);
  console.log("| measure | executor ms (median / p90) | docker run ms | raw API ms | executor ÷ docker run | executor ÷ raw API |");
  console.log("|---|---|---|---|---|---|");
  const ms = (t: Timing) => `${round(t.median)} / ${round(t.p90)}`;
  for (const [label, m] of [
    ["start (until running)", f.start],
    ["round trip (echo ok, output, removal)", f.roundTrip],
  ] as const)
    console.log(`| ${label} | ${ms(m.executor)} | ${ms(m.dockerRun)} | ${ms(m.rawApi)} | ${m.ratio.toFixed(2)}× | ${m.apiRatio.toFixed(2)}× |`);
  console.log("\nGoal: executor ≤ 1.2× bare docker run.");
}

if (require.main === module) {
  benchDockerExecutor({ runs: Number(process.env.BENCH_RUNS || 15) }).then(
    (figures) => {
      printDockerExecutorFigures(figures);
      process.exit(0);
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
