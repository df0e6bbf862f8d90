import type { JobEvent } from "../../lib/gpu-protocol";
import {
  applyJobEvent,
  cancelJob,
  gpuSecondsUsed,
  JobPatch,
  JobState,
  publicStatus,
} from "../../services/gpu-scheduler/transitions";

const T0 = new Date("2026-01-01T10:00:00.000Z");
const T1 = new Date("2026-01-01T10:00:05.000Z");
const T2 = new Date("2026-01-01T10:00:09.500Z");

const base: JobState = {
  status: "running",
  nodeId: "node-a",
  gpuUuid: "GPU-1",
  holding: true,
  startedAt: T1,
  completedAt: null,
  exitCode: null,
  output: null,
  errorMessage: null,
};
const job = (over: Partial<JobState>): JobState => ({ ...base, ...over });
const ids = { jobId: "6f1c2b8e-0000-4000-8000-000000000001", nodeId: "node-a", gpuUuid: "GPU-1", at: T2.toISOString() };
const started: JobEvent = { type: "started", ...ids, at: T1.toISOString() };
const finished = (exitCode: number, output = "done\n"): JobEvent => ({ type: "finished", ...ids, exitCode, output });
const failed: JobEvent = { type: "failed", ...ids, errorMessage: "Image busybox:nope not found", exitCode: null, output: "" };
const cancelled: JobEvent = { type: "cancelled", ...ids, exitCode: 143, output: "partial" };

type Case = { name: string; job: JobState; event: JobEvent; patch: JobPatch | null; cancelOnNode?: boolean };

const cases: Case[] = [
  {
    name: "started on a placed job: running, with the node's start time",
    job: job({ status: "assigned", startedAt: null }),
    event: started,
    patch: { status: "running", startedAt: T1 },
  },
  {
    name: "started on a job already running since the node accepted it: nothing changes",
    job: job({}),
    event: started,
    patch: null,
  },
  {
    name: "started on a running job without a start time: records it",
    job: job({ startedAt: null }),
    event: started,
    patch: { startedAt: T1 },
  },
  {
    name: "finished with exit 0: completed, result kept, card free",
    job: job({}),
    event: finished(0),
    patch: { status: "completed", startedAt: T1, completedAt: T2, exitCode: 0, output: "done\n", holding: false, errorMessage: null },
  },
  {
    name: "finished with exit 3: failed with the exit code in errorMessage, result kept",
    job: job({}),
    event: finished(3, "boom"),
    patch: {
      status: "failed",
      startedAt: T1,
      completedAt: T2,
      exitCode: 3,
      output: "boom",
      holding: false,
      errorMessage: "Command exited with code 3",
    },
  },
  {
    name: "finished before started was applied: completes from assigned, start time taken from the event",
    job: job({ status: "assigned", startedAt: null }),
    event: finished(0),
    patch: { status: "completed", startedAt: T2, completedAt: T2, exitCode: 0, output: "done\n", holding: false, errorMessage: null },
  },
  {
    name: "failed by the node: failed with its message",
    job: job({}),
    event: failed,
    patch: { status: "failed", startedAt: T1, completedAt: T2, exitCode: null, output: "", holding: false, errorMessage: "Image busybox:nope not found" },
  },
  {
    name: "cancelled by the node on a running job: cancelled",
    job: job({}),
    event: cancelled,
    patch: { status: "cancelled", startedAt: T1, completedAt: T2, exitCode: 143, output: "partial", holding: false, errorMessage: null },
  },
  {
    name: "duplicate finished on a completed job: nothing changes",
    job: job({ status: "completed", holding: false, completedAt: T2, exitCode: 0, output: "done\n" }),
    event: finished(0),
    patch: null,
  },
  {
    name: "late finished on a job the client cancelled: status stays, card freed, output kept for the logs",
    job: job({ status: "cancelled", completedAt: T2 }),
    event: finished(0, "all of it"),
    patch: { holding: false, exitCode: 0, output: "all of it" },
  },
  {
    name: "cancelled event after a cancel whose output is already kept: only frees the card",
    job: job({ status: "cancelled", completedAt: T2, exitCode: 0, output: "x" }),
    event: cancelled,
    patch: { holding: false },
  },
  {
    name: "finished on a job failed because its node was lost: terminal, nothing changes",
    job: job({ status: "failed", holding: false, completedAt: T2, errorMessage: "GPU node node-a was lost" }),
    event: finished(0),
    patch: null,
  },
  {
    name: "started on a job failed because its node was lost: the node must stop it",
    job: job({ status: "failed", holding: false, completedAt: T2, errorMessage: "GPU node node-a was lost" }),
    event: started,
    patch: null,
    cancelOnNode: true,
  },
  {
    name: "started arriving after finished: nothing, and no stop (the node already ended it)",
    job: job({ status: "completed", holding: false, completedAt: T2, exitCode: 0, output: "" }),
    event: started,
    patch: null,
  },
  {
    name: "started from a node the job is no longer placed on: stopped there",
    job: job({ status: "queued", nodeId: null, gpuUuid: null, holding: false, startedAt: null }),
    event: started,
    patch: null,
    cancelOnNode: true,
  },
  {
    name: "finished from another node than the placement: ignored",
    job: job({ nodeId: "node-b" }),
    event: finished(0),
    patch: null,
  },
  {
    name: "finished on another card of the same node: ignored",
    job: job({ gpuUuid: "GPU-2" }),
    event: finished(0),
    patch: null,
  },
  {
    name: "an end reported with a clock behind the start: completedAt is never before startedAt",
    job: job({ startedAt: new Date("2026-01-01T10:00:20.000Z") }),
    event: finished(0),
    patch: {
      status: "completed",
      startedAt: new Date("2026-01-01T10:00:20.000Z"),
      completedAt: new Date("2026-01-01T10:00:20.000Z"),
      exitCode: 0,
      output: "done\n",
      holding: false,
      errorMessage: null,
    },
  },
];

describe("gpu-scheduler transitions - job events", () => {
  test.each(cases)("$name", ({ job, event, patch, cancelOnNode = false }) => {
    const outcome = applyJobEvent(job, event);
    expect(outcome.patch).toEqual(patch);
    expect(outcome.cancelOnNode).toBe(cancelOnNode);
  });

  test("gpu-scheduler transitions - applying every event twice changes nothing the second time", () => {
    for (const c of cases) {
      const first = applyJobEvent(c.job, c.event);
      const after = { ...c.job, ...(first.patch ?? {}) } as JobState;
      expect(applyJobEvent(after, c.event).patch).toBeNull();
    }
  });

  test("gpu-scheduler transitions - no event moves a terminal job to another status", () => {
    for (const status of ["completed", "failed", "cancelled"] as const) {
      for (const event of [started, finished(0), finished(1), failed, cancelled]) {
        const patch = applyJobEvent(job({ status, completedAt: T2 }), event).patch;
        expect(patch?.status).toBeUndefined();
      }
    }
  });
});

describe("gpu-scheduler transitions - cancel", () => {
  test.each([
    ["queued", { status: "queued", nodeId: null, gpuUuid: null, holding: false, startedAt: null }, false],
    ["placed (assigned)", { status: "assigned", startedAt: null }, true],
    ["running", { status: "running" }, true],
  ] as const)("gpu-scheduler transitions - a %s job is cancelled at once", (_name, over, stopOnNode) => {
    const outcome = cancelJob(job(over as Partial<JobState>), T2);
    expect(outcome).toEqual({ ok: true, patch: { status: "cancelled", completedAt: T2 }, stopOnNode });
  });

  test.each(["completed", "failed", "cancelled"] as const)("gpu-scheduler transitions - a %s job cannot be cancelled", (status) => {
    expect(cancelJob(job({ status, holding: false }), T2)).toEqual({ ok: false, reason: "finished" });
  });
});

describe("gpu-scheduler transitions - views", () => {
  test("gpu-scheduler transitions - gpuSecondsUsed grows while running and stops at completion", () => {
    const running = { status: "running" as const, startedAt: T0, completedAt: null };
    expect(gpuSecondsUsed(running, T1)).toBe(5);
    expect(gpuSecondsUsed(running, T2)).toBe(9.5);
    expect(gpuSecondsUsed({ status: "completed", startedAt: T0, completedAt: T1 }, T2)).toBe(5);
    expect(gpuSecondsUsed({ status: "queued", startedAt: null, completedAt: null }, T2)).toBe(0);
    expect(gpuSecondsUsed({ status: "cancelled", startedAt: null, completedAt: T1 }, T2)).toBe(0);
  });

  test("gpu-scheduler transitions - a placed job looks queued to clients", () => {
    expect(publicStatus("assigned")).toBe("queued");
    expect(publicStatus("running")).toBe("running");
  });
});
