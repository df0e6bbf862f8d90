/**
 * usage summary - the GPU time of attempts the ledger does not have yet (running now, or ended and
 * still in gpu-scheduler's outbox), cut by the window and the clock as the ledger cuts records:
 * seconds × cards inside [from, min(to, now)); an ended attempt is a job of the window holding its end.
 */
import { NOTHING_NOW, RunningAttempt, summarize } from "../../services/usage/summary";
import { parsePrice } from "../../services/usage/pricing";

const T = (hhmmss: string) => new Date(`2030-01-15T${hhmmss}Z`);
const prices = { gpuSecond: parsePrice("P", "2"), kTokens: parsePrice("K", ""), gbHour: parsePrice("G", "") };
const window = { from: T("10:00:00"), to: T("11:00:00") };
const attempt = (start: string, end?: string, cards = 1): RunningAttempt => ({
  startedAt: T(start).toISOString(),
  ...(end ? { endedAt: T(end).toISOString() } : {}),
  cards,
  gpuName: "A100",
});

describe("usage summary - attempts not yet in the ledger", () => {
  const cases: Array<[string, RunningAttempt[], string, { jobs: number; gpuSeconds: number }]> = [
    ["running since before the window: from its start to now", [attempt("09:00:00")], "10:30:00", { jobs: 1, gpuSeconds: 1800 }],
    ["running, 2 cards, the clock past the window: until `to`", [attempt("10:50:00", undefined, 2)], "12:00:00", { jobs: 1, gpuSeconds: 1200 }],
    ["ended inside the window (in the outbox)", [attempt("10:10:00", "10:10:30", 4)], "10:40:00", { jobs: 1, gpuSeconds: 120 }],
    ["ended before the window", [attempt("09:00:00", "09:59:59")], "10:40:00", { jobs: 0, gpuSeconds: 0 }],
    ["ended after the window: its part inside, not a job of it", [attempt("10:59:00", "11:01:00")], "11:30:00", { jobs: 0, gpuSeconds: 60 }],
    ["ended exactly at `to`: a job of the window", [attempt("10:59:00", "11:00:00")], "11:30:00", { jobs: 1, gpuSeconds: 60 }],
    ["one running, one ended", [attempt("10:00:00"), attempt("10:05:00", "10:06:00", 2)], "10:10:00", { jobs: 2, gpuSeconds: 600 + 120 }],
  ];
  it.each(cases)("usage summary - %s", (_name, running, clock, expected) => {
    const s = summarize([], { ...NOTHING_NOW, running }, window, T(clock), prices);
    expect({ jobs: s.gpu.jobs, gpuSeconds: s.gpu.gpuSeconds }).toEqual(expected);
    expect(s.credits).toBeCloseTo(expected.gpuSeconds * 2, 6);
    expect(s.gpu.byGpuType).toEqual(expected.gpuSeconds ? { A100: expected.gpuSeconds } : {});
  });
});

describe("usage summary - preemptible GPU time", () => {
  const priced = { gpuSecond: parsePrice("P", '{"default": 1, "A100": 4}'), kTokens: parsePrice("K", ""), gbHour: parsePrice("G", ""), preemptibleFactor: 0.5 };
  const gpuTotal = (name: string, amount: number) => ({ clientId: "c", resource: "gpu" as const, name, amount, events: 1 });
  it("usage summary - a preemptible job's GPU-seconds count alike and cost PREEMPTIBLE_CREDIT_FACTOR of its card's price", () => {
    const s = summarize([gpuTotal("A100", 100), gpuTotal("preemptible:A100", 100)], NOTHING_NOW, window, T("10:30:00"), priced);
    expect(s.gpu.gpuSeconds).toBe(200);
    expect(s.credits).toBe(400 + 200);
    expect(s.gpu.byGpuType).toEqual({ A100: 100, "preemptible:A100": 100 });
  });
  it("usage summary - a running preemptible attempt is priced the same way", () => {
    const running = [{ ...attempt("10:00:00"), gpuName: "preemptible:RTX 3060" }];
    expect(summarize([], { ...NOTHING_NOW, running }, window, T("10:00:10"), priced).credits).toBe(5);
  });
});
