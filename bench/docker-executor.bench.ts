/**
 * bench:docker-executor — what the Docker executor adds to starting a job container, in one run,
 * alternating the order every run so all see the same engine:
 * - start: until the container runs (executor `started`, `docker run -d`, raw API create + start);
 * - round trip: a trivial job from request to exit code, output and removal.
 * Like is compared with like: the executor runs jobs with networking disabled (NetworkDisabled: no
 * network namespace is set up at all), which `docker run` cannot ask for (`--network none` still
 * makes one), so each has its own raw-API baseline with the same setting: the executor against the
 * raw engine API with networking disabled (goal ≤ 1.2×: hardening, capture and /out cost that much
 * at most), `docker run --network none` against the raw API with network mode none (the CLI's cost).
 * No ratio between the two settings is printed; the namespace's own cost is (raw API, both ways).
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
/**
 * `rawApi`: the same calls without hardening or capture, networking disabled as the executor's;
 * `rawApiNetns`: the same with network mode none (a namespace), as `docker run --network none`.
 * `ratio`: executor ÷ rawApi (the goal); `cliRatio`: docker run ÷ rawApiNetns.
 */
export type Measure = { executor: Timing; dockerRun: Timing; rawApi: Timing; rawApiNetns: Timing; ratio: number; cliRatio: number };
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
    startApiNetns: [] as number[],
    tripExec: [] as number[],
    tripRun: [] as number[],
    tripApi: [] as number[],
    tripApiNetns: [] as number[],
  };
  // networkDisabled: as the executor creates jobs (GPU_JOB_NETWORK=none); else as `docker run --network none`.
  const rawCreate = (cmd: string, networkDisabled: boolean) =>
    docker.createContainer({
      Image: image,
      Cmd: ["sh", "-c", cmd],
      Labels: { [LABEL_NAMESPACE]: namespace },
      NetworkDisabled: networkDisabled,
      HostConfig: { NetworkMode: "none" },
    });
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
  const rawApiStart = (networkDisabled: boolean) => async () => {
    const t0 = performance.now();
    const container = await rawCreate("sleep 30", networkDisabled);
    await container.start();
    const ms = performance.now() - t0;
    await container.remove({ force: true });
    return ms;
  };
  const rawApiTrip = (networkDisabled: boolean) => async () => {
    const t0 = performance.now();
    const container = await rawCreate("echo ok", networkDisabled);
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
        [rawApiStart(true), times.startApi],
        [rawApiStart(false), times.startApiNetns],
        [executorTrip, times.tripExec],
        [dockerRunTrip, times.tripRun],
        [rawApiTrip(true), times.tripApi],
        [rawApiTrip(false), times.tripApiNetns],
      ];
      if (i % 2) pairs.reverse();
      for (const [measure, into] of pairs) into.push(await measure());
    }
  } finally {
    await executor.release(); // the /out volumes it prepared ahead
    await removeContainersOf(docker, namespace);
    rmSync(logDir, { recursive: true, force: true });
  }

  const measure = (executorMs: number[], runMs: number[], apiMs: number[], netnsMs: number[]): Measure => {
    const [e, r, a, n] = [summarize(executorMs), summarize(runMs), summarize(apiMs), summarize(netnsMs)];
    return { executor: e, dockerRun: r, rawApi: a, rawApiNetns: n, ratio: e.median / a.median, cliRatio: r.median / n.median };
  };
  return {
    runs,
    image,
    start: measure(times.startExec, times.startRun, times.startApi, times.startApiNetns),
    roundTrip: measure(times.tripExec, times.tripRun, times.tripApi, times.tripApiNetns),
  };
}

export function printDockerExecutorFigures(f: DockerExecutorFigures): void {
  console.log(`\nDocker executor against the raw engine API with the same network setting (${f.image}, ${f.runs} runs each, alternating)\n`);
  console.log("| measure | networking disabled: executor ms (median / p90) | raw API ms | executor ÷ raw API |");
  console.log("|---|---|---|---|");
  const ms = (t: Timing) => `${round(t.median)} / ${round(t.p90)}`;
  const measures = [
    ["start (until running)", f.start],
    ["round trip (echo ok, output, removal)", f.roundTrip],
  ] as const;
  for (const [label, m] of measures) console.log(`| ${label} | ${ms(m.executor)} | ${ms(m.rawApi)} | ${m.ratio.toFixed(2)}× |`);
  console.log("\n| measure | network namespace (mode none): docker run ms | raw API ms | docker run ÷ raw API |");
  console.log("|---|---|---|---|");
  for (const [label, m] of measures) console.log(`| ${label} | ${ms(m.dockerRun)} | ${ms(m.rawApiNetns)} | ${m.cliRatio.toFixed(2)}× |`);
  console.log("\nGoal: executor ≤ 1.2× the raw API with the same setting. The two settings are not compared with each other.");
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
