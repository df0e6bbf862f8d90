import { SeenState, statusChanges, WrittenJob } from "../../services/gpu-scheduler/loop/status-events";

const NOW = new Date("2026-01-01T10:00:00.000Z");
const STARTED = new Date("2026-01-01T09:59:00.000Z");
const CLIENT = "11111111-1111-4111-8111-111111111111";

const row = (over: Partial<WrittenJob>): WrittenJob => ({ id: "j1", client_id: CLIENT, status: "running", started_at: STARTED, attempts: 1, ...over });

describe("gpu-scheduler status events - which committed writes are public status changes", () => {
  test.each<[string, SeenState, Partial<WrittenJob>, string | null]>([
    ["queued → assigned is still queued: no event", { status: "queued" }, { status: "assigned", started_at: null }, null],
    ["assigned → running before the process starts is still queued: no event", { status: "assigned" }, { status: "running", started_at: null }, null],
    ["running without startedAt → running with it: queued → running", { status: "running", startedAt: null }, { status: "running" }, "queued→running"],
    ["running → completed", { status: "running", startedAt: STARTED }, { status: "completed" }, "running→completed"],
    ["running → failed", { status: "running", startedAt: STARTED }, { status: "failed" }, "running→failed"],
    ["queued → cancelled", { status: "queued" }, { status: "cancelled", started_at: null }, "queued→cancelled"],
    ["running → queued (a retry)", { status: "running", startedAt: STARTED }, { status: "queued", started_at: null }, "running→queued"],
    ["a placement written back to the queue stays queued", { status: "assigned" }, { status: "queued", started_at: null }, null],
    ["a finished job whose card is released (holding only) does not change", { status: "completed", startedAt: STARTED }, { status: "completed" }, null],
  ])("%s", (_name, seen, written, expected) => {
    const changes = statusChanges(new Map([["j1", seen]]), [row(written)], NOW);
    expect(changes.map((c) => `${c.previous}→${c.status}`)).toEqual(expected ? [expected] : []);
    for (const c of changes) expect(c).toMatchObject({ jobId: "j1", clientId: CLIENT, at: NOW.toISOString() });
  });

  test("gpu-scheduler status events - a written job its decision never saw is not reported", () => {
    expect(statusChanges(new Map(), [row({ status: "completed" })], NOW)).toEqual([]);
  });

  test.each<[string, SeenState, Partial<WrittenJob>, boolean]>([
    [
      "running → completed with a webhook URL queues a delivery",
      { status: "running", startedAt: STARTED },
      { status: "completed", webhook_url: "https://h.example/x" },
      true,
    ],
    [
      "queued → cancelled with a webhook URL queues one",
      { status: "queued" },
      { status: "cancelled", started_at: null, webhook_url: "https://h.example/x" },
      true,
    ],
    ["running → completed without one queues none", { status: "running", startedAt: STARTED }, { status: "completed", webhook_url: null }, false],
    [
      "queued → running with one queues none (not terminal)",
      { status: "running", startedAt: null },
      { status: "running", webhook_url: "https://h.example/x" },
      false,
    ],
    [
      "running → queued (a retry) with one queues none",
      { status: "running", startedAt: STARTED },
      { status: "queued", started_at: null, webhook_url: "https://h.example/x" },
      false,
    ],
  ])("gpu-scheduler status events - %s (the senders wake for it)", (_name, seen, written, webhook) => {
    const [change] = statusChanges(new Map([["j1", seen]]), [row(written)], NOW);
    expect(change.webhook === true).toBe(webhook);
  });
});
