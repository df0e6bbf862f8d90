/**
 * What every executor shares: one running job's life from launch to its single outcome, the time
 * limit, and stop requests (cancel, time limit, node shutdown). An executor only supplies JobOps:
 * how to launch, wait for the exit, kill and clean up its kind of job.
 */
import type { NodeCard } from "./discovery";
import type { ExecutorKind } from "../../lib/gpu-protocol";
import { JOB_ID_SYNTAX, type PlatformGrantParams, type StoredJob } from "../../lib/job-spec";
import type { EncodedOutput } from "../../lib/output-encoding";
import { logKey, OutputCapture } from "./output";

/** Job ids also name log files: no path separators, bounded. */
export const JOB_ID_PATTERN = new RegExp(JOB_ID_SYNTAX);

/**
 * How every executor starts a job's command: `<shell> -c JOIN_STDERR ci-job <command>`, an outer
 * shell that joins stderr into stdout (so the log keeps the order the job wrote in), then execs
 * the job's own `<shell> -c <command>`. The command follows as the next argument.
 */
export function joinedShell(shell: string): string[] {
  return [shell, "-c", `exec 2>&1; exec ${shell} -c "$1"`, "ci-job"];
}

/**
 * A job as an executor runs it: the job as the scheduler stored it (lib/job-spec.ts, every field
 * of it, so a new one reaches the executors as it is) on this node's cards.
 */
export type JobSpec = Omit<StoredJob, "timeoutSeconds"> & {
  jobId: string;
  /** The job's (first) card. */
  card: NodeCard;
  /** All the job's cards, `card` first (a multi-card job); absent: `card` alone. */
  cards?: NodeCard[];
  /** The job's own time limit; absent: the node's (JobLimits.timeoutS). */
  timeoutS?: number;
  /** The job's own environment variables (never logged); the platform's card variables go on top. */
  env?: Record<string, string>;
  /** Which attempt of the job (RunJobParams.attempt); absent: 1. Each has its own log file. */
  attempt?: number;
  /** Platform access (issue 28, platform-access.ts): secrets, for the job's environment only. */
  platform?: PlatformGrantParams;
};

/** Every card the job holds and sees. */
export const jobCards = (spec: Pick<JobSpec, "card" | "cards">): NodeCard[] => (spec.cards?.length ? spec.cards : [spec.card]);
/** Their uuids, comma-separated, as CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES take them. */
export const visibleDevices = (cards: NodeCard[]): string => cards.map((c) => c.uuid).join(",");

/** The limits of one job: the node's, with the job's own time limit when it has one. */
export const limitsOf = (spec: Pick<JobSpec, "timeoutS">, limits: JobLimits): JobLimits => (spec.timeoutS ? { ...limits, timeoutS: spec.timeoutS } : limits);

/** `preempt`: a cancel for a waiting job (issue 30), with its own grace period; it ends `cancelled` too. */
export type StopReason = "cancel" | "preempt" | "timeout" | "shutdown";

/** `output` (+ `outputBase64` when the bytes are not plain text): lib/output-encoding.ts. */
export type JobOutcome =
  | ({ type: "finished"; exitCode: number } & EncodedOutput)
  | ({ type: "failed"; errorMessage: string; exitCode: number | null } & EncodedOutput)
  | ({ type: "cancelled"; exitCode: number | null } & EncodedOutput);

/** A failure whose message a client may read (as the job's errorMessage). */
export class JobError extends Error {}

export interface JobOps {
  /**
   * Starts the job, sending its output to `output`; throws JobError with a readable reason. May
   * return when (epoch ms) the job's process began, where that precedes the launch's answer.
   */
  launch(output: OutputCapture): Promise<number | void>;
  /** Resolves with the exit code once the job has ended. */
  exited(): Promise<number>;
  /** SIGTERM, then SIGKILL after `graceS`. */
  kill(graceS: number): Promise<void>;
  /** After the exit: wait for the last output, release what the job held (container, folder). */
  cleanup(): Promise<void>;
  /** The node stops but the job goes on (re-adopted on restart): let go of streams only. */
  detach(): void;
  /** After the exit: why the job failed although it exited (the kernel killed it for memory), if it did. */
  failure?(): string | undefined;
}

export type JobLimits = {
  timeoutS: number;
  graceS: number;
  /** Between SIGTERM and SIGKILL for a preemption (GPU_PREEMPT_GRACE_S; absent: graceS). */
  preemptGraceS?: number;
  logDir: string;
  /** Cap of the job's log file (GPU_JOB_OUTPUT_MAX_MB); the result's tail goes on past it. */
  outputMaxBytes?: number;
  /** Most bytes of the archive of what a job leaves under /out (GPU_JOB_OUT_MAX_MB); also the largest file it may write. */
  outMaxBytes?: number;
  /** A job adopted after a node restart: its log is continued, not restarted. */
  adopted?: boolean;
  /** How long the job has already run (adopted jobs), so the time limit counts from its start. */
  elapsedMs?: number;
  log?: (message: string, err: unknown) => void;
};

export interface JobExecutor {
  readonly kind: ExecutorKind;
  /** Docker jobs outlive the node process and are re-adopted; process jobs die with it. */
  readonly jobsOutliveNode: boolean;
  run(spec: JobSpec): RunningJob;
  /** Jobs this node left running (or finished unseen) before a restart. */
  adopt(cardUuids: string[]): Promise<RunningJob[]>;
  /** The node stops: what the executor keeps ready for jobs to come (Docker: /out volumes prepared ahead) goes. */
  release?(): Promise<void>;
}

const MAX_TIMER_MS = 2 ** 31 - 1;

export class RunningJob {
  /** true once the job runs; false when it could not be launched. */
  readonly started: Promise<boolean>;
  /** The one terminal outcome; null when the node let go of the job (it keeps running). */
  readonly outcome: Promise<JobOutcome | null>;
  /**
   * When its process or container started (launch done: after any pull and create; an adopted
   * job's container start); unset while launching and for a job that never started.
   */
  startedAt?: Date;
  /** An adopted job's start, from how long it has run. */
  private readonly adoptedStartMs?: number;
  private stopReason?: StopReason;
  private launched = false;
  private ended = false;
  private detached = false;
  private launchError = "";
  private capture?: OutputCapture;
  private timer?: NodeJS.Timeout;
  private letGo!: () => void;

  constructor(
    readonly jobId: string,
    readonly gpuUuid: string,
    private readonly ops: JobOps,
    private readonly limits: JobLimits,
    /** Which attempt of the job this is (events carry it; its log file is its own). */
    readonly attempt = 1,
    /** Every card it holds (`gpuUuid` first): the node counts them all busy until it ends. */
    readonly gpuUuids: string[] = [gpuUuid],
  ) {
    if (limits.adopted && limits.elapsedMs) this.adoptedStartMs = Date.now() - limits.elapsedMs;
    this.started = this.launch();
    this.outcome = this.supervise();
  }

  /** The name of this attempt's log file (output.ts logKey). */
  get logKey(): string {
    return logKey(this.jobId, this.attempt);
  }

  get stopping(): StopReason | undefined {
    return this.stopReason;
  }

  private async launch(): Promise<boolean> {
    try {
      this.capture = await OutputCapture.open(this.limits.logDir, this.logKey, { maxFileBytes: this.limits.outputMaxBytes, resume: this.limits.adopted });
      const began = await this.ops.launch(this.capture);
      this.startedAt = new Date(this.adoptedStartMs ?? began ?? Date.now());
      this.launched = true;
      return true;
    } catch (err) {
      if (!(err instanceof JobError)) this.limits.log?.(`Job ${this.jobId} could not be launched`, err);
      this.launchError = err instanceof JobError ? err.message : "The job could not be started on its GPU node";
      return false;
    }
  }

  private async supervise(): Promise<JobOutcome | null> {
    const letGo = new Promise<"detached">((resolve) => (this.letGo = () => resolve("detached")));
    if (!(await this.started)) {
      this.ended = true;
      await this.ops.cleanup().catch((err) => this.limits.log?.(`Cleanup of job ${this.jobId} failed`, err));
      const output = await this.finishOutput();
      if (this.stopReason === "cancel" || this.stopReason === "preempt") return { type: "cancelled", exitCode: null, ...output };
      return { type: "failed", errorMessage: this.launchError, exitCode: null, ...output };
    }
    if (this.detached) return null;
    if (this.stopReason) void this.kill(); // stopped while it was being launched
    const remainingMs = this.limits.timeoutS * 1000 - (this.limits.elapsedMs ?? 0);
    this.timer = setTimeout(() => void this.stop("timeout"), Math.min(Math.max(remainingMs, 0), MAX_TIMER_MS));
    let exitCode: number | null = null;
    let watchError: unknown;
    try {
      const result = await Promise.race([this.ops.exited(), letGo]);
      if (result === "detached") return null;
      exitCode = result;
    } catch (err) {
      watchError = err;
    } finally {
      clearTimeout(this.timer);
    }
    if (this.detached) return null;
    this.ended = true;
    await this.ops.cleanup().catch((err) => this.limits.log?.(`Cleanup of job ${this.jobId} failed`, err));
    const output = await this.finishOutput();
    switch (this.stopReason) {
      case "cancel":
      case "preempt":
        return { type: "cancelled", exitCode, ...output };
      case "timeout":
        return { type: "failed", errorMessage: `Job exceeded the time limit of ${this.limits.timeoutS} s`, exitCode, ...output };
      case "shutdown":
        return { type: "failed", errorMessage: "The GPU node stopped while the job was running", exitCode, ...output };
    }
    if (exitCode === null) {
      this.limits.log?.(`Lost track of job ${this.jobId}`, watchError);
      return { type: "failed", errorMessage: "The GPU node lost track of the job", exitCode: null, ...output };
    }
    const failure = this.ops.failure?.();
    if (failure) return { type: "failed", errorMessage: failure, exitCode, ...output };
    return { type: "finished", exitCode, ...output };
  }

  private async finishOutput(): Promise<EncodedOutput> {
    if (!this.capture) return { output: "" };
    await this.capture.close();
    return this.capture.result();
  }

  private async kill(): Promise<void> {
    try {
      await this.ops.kill(this.stopReason === "preempt" ? (this.limits.preemptGraceS ?? this.limits.graceS) : this.limits.graceS);
    } catch (err) {
      this.limits.log?.(`Stopping job ${this.jobId} failed`, err);
    }
  }

  /** Stops the job; false when it had already ended (or was let go). The first reason wins. */
  async stop(reason: StopReason): Promise<boolean> {
    if (this.ended || this.detached) return false;
    this.stopReason ??= reason;
    // Still launching: supervise() kills it as soon as it runs.
    if (this.launched) await this.kill();
    return true;
  }

  /** The node stops: leave the job running, stop watching it. */
  detach(): void {
    if (this.ended || this.detached) return;
    this.detached = true;
    clearTimeout(this.timer);
    this.ops.detach();
    void this.capture?.close();
    this.letGo?.();
  }
}
