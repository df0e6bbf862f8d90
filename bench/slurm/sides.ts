/**
 * The two sides of bench:slurm, behind one shape: submit one job printing its start time
 * (`date +%s%N`, run by the host's own `date` on both sides), tell when a set of jobs has
 * completed, and read back when each started by that printed clock.
 * - SlurmSide: the one-host cluster of bench/slurm/cluster.sh, jobs through `sbatch --gres=gpu:1`,
 *   completions from its job completion log (jobcomp/filetxt), start times from the jobs' output files.
 * - PlatformSide: gateway, auth, gpu-scheduler and one gpu-node (8 simulated cards, the process
 *   executor: each job a real process in the bubblewrap sandbox) in one process (`npm start` on one
 *   box), jobs through POST /api/gpu/jobs, completions from its database, start times from the job logs.
 */
import { execFile } from "child_process";
import { closeSync, existsSync, openSync, readFileSync, readSync } from "fs";
import path from "path";
import { promisify } from "util";
import { Client } from "pg";
import { ChildService, dropDatabase, freePort, http, spawnServices, testDatabaseUrl, waitFor } from "../../test/support/platform";
import { JobCostMeter, jobsInProgress, PROBE_ARGS } from "../lib/job-cost-meter";
import { type Call, jsonClient } from "../lib/json-client";

const run = promisify(execFile);
/** What every job runs: its start, by the host clock, in nanoseconds. */
export const JOB_COMMAND = "date +%s%N";
export const GPUS = 8;
/** What every job of the array runs: nothing (the cost of the array itself, not of its work). */
export const ARRAY_COMMAND = "true";
/** The operator account of the platform side (it drains the node while submissions are measured alone). */
const ADMIN_EMAIL = "operator@example.com";

export interface Side {
  readonly name: string;
  /** Submits one job; resolves with its id once the submission was accepted. */
  submit(): Promise<string>;
  /** Whether every one of `ids` completed; throws when one of them ended otherwise. */
  completed(ids: string[]): Promise<boolean>;
  /** When each job started (epoch ms, from the line it printed). */
  startTimes(ids: string[]): Promise<Map<string, number>>;
  /**
   * Submits one array of `count` jobs running ARRAY_COMMAND (one submission); resolves once it was
   * accepted with a probe: how many of its jobs completed so far (it throws when one ended otherwise).
   */
  submitArray(count: number): Promise<() => Promise<number>>;
  /** No job starts from now on (the cluster's node drained); submissions are still accepted. */
  hold(): Promise<void>;
  /** Cancels `ids` (submitted while held: none of them ran) and lets jobs start again. */
  release(ids: string[]): Promise<void>;
  stop(): Promise<void>;
}

/** The epoch ms in a job's output (`date +%s%N`). */
export function printedStart(output: string, id: string): number {
  const ns = output.trim().split("\n")[0];
  if (!/^\d{19}$/.test(ns)) throw new Error(`job ${id} printed ${JSON.stringify(output.slice(0, 80))}, not its start`);
  return Number(BigInt(ns) / 1000n) / 1000;
}

/** Each job's final state (COMPLETED, FAILED, …) by id, from Slurm's jobcomp/filetxt log. */
export function jobCompStates(log: string): Map<string, string> {
  const states = new Map<string, string>();
  for (const line of log.split("\n")) {
    const m = /^JobId=(\d+) .*?\bJobState=(\S+)/.exec(line);
    if (m) states.set(m[1], m[2]);
  }
  return states;
}

/** Final states appended to Slurm's job completion log since `from` (its size at the start), read as they come. */
class JobCompTail {
  private readonly states = new Map<string, string>();
  private rest = "";
  constructor(
    private readonly file: string,
    private offset: number,
  ) {}

  /** The states of the jobs completed since the start, by id (`| COMPLETED` and others). */
  read(): Map<string, string> {
    if (!existsSync(this.file)) return this.states;
    const fd = openSync(this.file, "r");
    try {
      const buf = Buffer.alloc(1 << 20);
      for (let n; (n = readSync(fd, buf, 0, buf.length, this.offset)) > 0; this.offset += n) {
        const text = this.rest + buf.toString("utf8", 0, n);
        const cut = text.lastIndexOf("\n") + 1;
        for (const [id, state] of jobCompStates(text.slice(0, cut))) this.states.set(id, state);
        this.rest = text.slice(cut);
      }
    } finally {
      closeSync(fd);
    }
    return this.states;
  }
}

export class SlurmSide implements Side {
  readonly name = "Slurm";
  private readonly env: NodeJS.ProcessEnv;
  private readonly script = path.join(__dirname, "cluster.sh");

  /** cluster.sh start while it runs: a stop waits for it, or the daemons it starts would outlive the stop. */
  private starting?: Promise<{ stdout: string }>;

  constructor(private readonly dir: string) {
    this.env = { ...process.env, SLURM_CONF: path.join(dir, "slurm.conf") };
  }

  /** Installs (if absent), configures and starts the cluster in `dir`; prints what it started. */
  async start(): Promise<void> {
    this.starting = run("bash", [this.script, "start", this.dir], { timeout: 600_000 });
    try {
      const { stdout } = await this.starting;
      process.stdout.write(stdout);
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  async submit(): Promise<string> {
    const args = ["--parsable", "--gres=gpu:1", `--chdir=${this.dir}`, `--output=${this.dir}/%j.out`, "--wrap", JOB_COMMAND];
    const { stdout } = await run("sbatch", args, { env: this.env });
    return stdout.trim().split(";")[0];
  }

  async completed(ids: string[]): Promise<boolean> {
    const log = path.join(this.dir, "jobcomp.txt");
    const states = jobCompStates(existsSync(log) ? readFileSync(log, "utf8") : "");
    const bad = ids.filter((id) => states.has(id) && states.get(id) !== "COMPLETED");
    if (bad.length) throw new Error(`Slurm jobs ${bad.slice(0, 5).join(", ")} ended ${states.get(bad[0])}`);
    return ids.every((id) => states.has(id));
  }

  async startTimes(ids: string[]): Promise<Map<string, number>> {
    return new Map(ids.map((id) => [id, printedStart(readFileSync(path.join(this.dir, `${id}.out`), "utf8"), id)]));
  }

  /** `sbatch --array=0-(count-1)`: Slurm's fastest way in; its tasks counted in the completion log. */
  async submitArray(count: number): Promise<() => Promise<number>> {
    const log = path.join(this.dir, "jobcomp.txt");
    const tail = new JobCompTail(log, existsSync(log) ? readFileSync(log).length : 0);
    const args = ["--parsable", `--array=0-${count - 1}`, "--gres=gpu:1", `--chdir=${this.dir}`, "--output=/dev/null", "--wrap", ARRAY_COMMAND];
    await run("sbatch", args, { env: this.env });
    return async () => {
      const states = [...tail.read().values()];
      const bad = states.filter((s) => s !== "COMPLETED");
      if (bad.length) throw new Error(`${bad.length} Slurm array jobs ended ${bad[0]}`);
      return states.length;
    };
  }

  /** The cluster's one node (`sinfo`) while it is drained, and the completion log's length then. */
  private held?: { node: string; logAt: number };

  async hold(): Promise<void> {
    const { stdout } = await run("sinfo", ["-h", "-N", "-o", "%N"], { env: this.env });
    const node = stdout.trim().split("\n")[0];
    const log = path.join(this.dir, "jobcomp.txt");
    this.held = { node, logAt: existsSync(log) ? readFileSync(log).length : 0 };
    await run("scontrol", ["update", `NodeName=${node}`, "State=DRAIN", "Reason=bench"], { env: this.env });
  }

  async release(ids: string[]): Promise<void> {
    const { node, logAt } = this.held!;
    await run("scancel", ids, { env: this.env });
    // Until the completion log has them all: a later part reads the jobs that end after it starts.
    const tail = new JobCompTail(path.join(this.dir, "jobcomp.txt"), logAt);
    await waitFor(
      () => {
        const states = tail.read();
        return ids.every((id) => states.has(id));
      },
      { timeoutMs: 60_000, intervalMs: 250, message: `${ids.length} cancelled Slurm jobs logged` },
    );
    await run("scontrol", ["update", `NodeName=${node}`, "State=RESUME"], { env: this.env });
    this.held = undefined;
  }

  async stop(): Promise<void> {
    await this.starting?.catch(() => undefined);
    await run("bash", [this.script, "stop", this.dir], { timeout: 60_000 });
  }
}

export class PlatformSide implements Side {
  readonly name = "platform";
  private token = "";
  /** The account's client for what the bench measures (bench/lib/json-client.ts: fetch's own CPU would load the shared cores). */
  private api!: Call;
  /** An operator's token (ADMIN_EMAILS), for draining the node while held. */
  private adminToken = "";
  private constructor(
    private readonly proc: ChildService,
    private readonly db: Client,
    private readonly databaseUrl: string,
    private readonly base: string,
    /** The per-job cost budget of the platform's process (bench/lib/job-cost-meter.ts). */
    readonly meter: JobCostMeter,
  ) {}

  /** Starts the platform with one gpu-node of GPUS simulated cards; job logs under `dir`. */
  static async start(dir: string): Promise<PlatformSide> {
    const databaseUrl = testDatabaseUrl();
    const port = await freePort();
    const db = new Client({ connectionString: databaseUrl });
    const meter = new JobCostMeter(db, () => ({ "platform process": [proc.proc.pid!] }));
    const proc = spawnServices(
      ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "admin"],
      {
        BENCH_JOB_COST_DIR: meter.dir,
        TRANSPORTER: "",
        DATABASE_URL: databaseUrl,
        PORT: String(port),
        JWT_SECRET: "bench-secret",
        GPU_EXECUTOR: "process",
        GPU_SIMULATE: Array.from({ length: GPUS }, () => "NVIDIA H100 80GB HBM3:81920").join(","),
        GPU_JOB_LOG_DIR: path.join(dir, "logs"),
        // One account submits the whole run: throughput is measured here, not the per-account queue cap.
        QUOTA_QUEUED_JOBS: "1000000",
        ADMIN_EMAILS: ADMIN_EMAIL,
      },
      // BENCH_PROFILE_DIR: a CPU profile of the platform's process, written when it stops.
      process.env.BENCH_PROFILE_DIR ? [...PROBE_ARGS, "--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : PROBE_ARGS,
    );
    const side = new PlatformSide(proc, db, databaseUrl, `http://127.0.0.1:${port}`, meter);
    try {
      await side.ready();
      return side;
    } catch (err) {
      await side.stop();
      throw err;
    }
  }

  /** Once the gateway answers: registers the bench's account and waits for the cards. */
  private async ready(): Promise<void> {
    const reg = await waitFor(
      async () => {
        if (this.proc.proc.exitCode !== null) throw new Error(this.proc.output());
        const body = { email: "bench@example.com", name: "Bench", password: "bench-password" };
        const res = await http(this.base, "POST", "/api/auth/register", { body }).catch(() => undefined);
        return res?.status === 201 ? res : false;
      },
      { timeoutMs: 60_000, message: "the gateway to answer" },
    );
    this.token = reg.body.accessToken;
    this.api = jsonClient(this.base, this.token, 64);
    const admin = await http(this.base, "POST", "/api/auth/register", { body: { email: ADMIN_EMAIL, name: "Operator", password: "bench-password" } });
    this.adminToken = admin.body.accessToken;
    await waitFor(async () => (await http(this.base, "GET", "/api/gpu/status", { token: this.token })).body?.cluster?.totalGpus === GPUS, {
      timeoutMs: 30_000,
      message: `${GPUS} cards announced`,
    });
    await this.db.connect();
  }

  async submit(): Promise<string> {
    const res = await this.api("POST", "/api/gpu/jobs", { command: JOB_COMMAND });
    if (res.status !== 201) throw new Error(`POST /api/gpu/jobs: ${res.status} ${res.text}`);
    return res.body.id;
  }

  async completed(ids: string[]): Promise<boolean> {
    // The jobs themselves are read once, at the end: polling them would add to the per-job budget.
    if ((await jobsInProgress(this.db)) > 0) return false;
    const { rows } = await this.db.query<{ n: number; bad: number }>(
      `SELECT count(*) FILTER (WHERE status = 'completed')::int AS n, count(*) FILTER (WHERE status IN ('failed', 'cancelled'))::int AS bad
       FROM gpu_scheduler.jobs WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    if (rows[0].bad) throw new Error(`${rows[0].bad} platform jobs did not complete`);
    return rows[0].n === ids.length;
  }

  /** One POST with `arrayCount`; its jobs' outcomes counted by the array's own counters (job_arrays). */
  async submitArray(count: number): Promise<() => Promise<number>> {
    const body = { command: ARRAY_COMMAND, arrayCount: count };
    const res = await this.api("POST", "/api/gpu/jobs", body);
    if (res.status !== 201) throw new Error(`POST /api/gpu/jobs (array): ${res.status} ${res.text}`);
    return async () => {
      const { rows } = await this.db.query<{ completed: number; failed: number; cancelled: number }>(
        `SELECT completed, failed, cancelled FROM gpu_scheduler.job_arrays WHERE id = $1`,
        [res.body.arrayId],
      );
      if (rows[0].failed || rows[0].cancelled) throw new Error(`${rows[0].failed + rows[0].cancelled} platform array jobs did not complete`);
      return rows[0].completed;
    };
  }

  /** The gpu-node's id, as operators see it. */
  private async nodeId(): Promise<string> {
    const res = await http(this.base, "GET", "/api/admin/nodes", { token: this.adminToken });
    if (res.status !== 200) throw new Error(`GET /api/admin/nodes: ${res.status} ${res.text}`);
    return res.body.nodes[0].id;
  }

  async hold(): Promise<void> {
    const res = await http(this.base, "POST", `/api/admin/nodes/${await this.nodeId()}/drain`, { token: this.adminToken });
    if (res.status !== 200) throw new Error(`drain: ${res.status} ${res.text}`);
  }

  async release(ids: string[]): Promise<void> {
    const left = [...ids];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let id = left.pop(); id; id = left.pop()) {
          const res = await this.api("POST", `/api/gpu/jobs/${id}/cancel`);
          if (res.status !== 200) throw new Error(`cancel ${id}: ${res.status} ${res.text}`);
        }
      }),
    );
    const res = await http(this.base, "POST", `/api/admin/nodes/${await this.nodeId()}/resume`, { token: this.adminToken });
    if (res.status !== 200) throw new Error(`resume: ${res.status} ${res.text}`);
  }

  async startTimes(ids: string[]): Promise<Map<string, number>> {
    const times = new Map<string, number>();
    for (const id of ids) {
      const res = await http(this.base, "GET", `/api/gpu/jobs/${id}/logs`, { token: this.token });
      if (res.status !== 200) throw new Error(`GET logs of ${id}: ${res.status} ${res.text}`);
      times.set(id, printedStart(res.text, id));
    }
    return times;
  }

  async stop(): Promise<void> {
    await this.proc.stop();
    await this.db.end().catch(() => undefined);
    await dropDatabase(this.databaseUrl).catch(() => undefined);
    this.meter.close();
  }
}
