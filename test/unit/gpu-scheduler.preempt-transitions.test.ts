import type { JobEvent } from "../../lib/gpu-protocol";
import { applyJobEvent, JobState, PREEMPTED_REASON, preempt } from "../../services/gpu-scheduler/core/transitions";

const T0 = new Date("2026-01-01T10:00:00.000Z");
const T1 = new Date("2026-01-01T10:00:05.000Z");
const NOW = new Date("2026-01-01T10:00:30.000Z");
const base: JobState = {
  status: "running",
  nodeId: "node-a",
  gpuUuid: "GPU-1",
  holding: true,
  assignedAt: T0,
  startedAt: T1,
  completedAt: null,
  exitCode: null,
  output: null,
  errorMessage: null,
  attempts: 1,
  maxRetries: 2,
};
const ids = { jobId: "6f1c2b8e-0000-4000-8000-000000000001", nodeId: "node-a", gpuUuid: "GPU-1", at: "2026-01-01T10:00:20.000Z" };
const cancelled = (attempt: number): JobEvent => ({ type: "cancelled", ...ids, attempt, startedAt: T1.toISOString(), exitCode: 143, output: "partial" });
const exited = (attempt: number): JobEvent => ({ type: "finished", ...ids, attempt, startedAt: T1.toISOString(), exitCode: 1, output: "x" });

describe("gpu-scheduler preemption - transitions", () => {
  test("preempt: a running preemptible job is marked once; queued, ended or marked ones are not", () => {
    expect(preempt(base)).toEqual({ preempting: true });
    expect(preempt({ ...base, preempting: true })).toBeNull();
    expect(preempt({ ...base, status: "queued", holding: false })).toBeNull();
    expect(preempt({ ...base, status: "completed", holding: true })).toBeNull();
  });

  test("its node's cancelled event sends a preempted job back to the queue, preemptions + 1, the attempt kept, retries untouched", () => {
    const patch = applyJobEvent({ ...base, preempting: true }, cancelled(1), NOW).patch!;
    expect(patch).toMatchObject({
      status: "queued",
      holding: false,
      nodeId: null,
      preempting: false,
      preemptions: 1,
      statusReason: PREEMPTED_REASON,
      startedAt: null,
      exitCode: null,
    });
    expect(patch.endedAttempt).toMatchObject({ attempt: 1, errorMessage: PREEMPTED_REASON, exitCode: 143, output: "partial" });
    expect(patch.notBefore).toBeUndefined();
  });

  test("a client's cancel of an unmarked job stays a cancel", () => {
    expect(applyJobEvent(base, cancelled(1), NOW).patch).toMatchObject({ status: "cancelled" });
  });

  test("after two preemptions, a failure is retry 1 of 2 (attempt 3 counts as the first failure)", () => {
    const patch = applyJobEvent({ ...base, attempts: 3, preemptions: 2 }, exited(3), NOW).patch!;
    expect(patch.status).toBe("queued");
    expect(patch.statusReason).toMatch(/^retry 1 of 2/);
    expect(patch.endedAttempt!.attempt).toBe(3);
  });

  test("retries run out by failures, not by preemptions", () => {
    const patch = applyJobEvent({ ...base, attempts: 5, preemptions: 2 }, exited(5), NOW).patch!;
    expect(patch.status).toBe("failed");
    expect(patch.statusReason).toBe("no retry after attempt 3 of 3");
  });
});
