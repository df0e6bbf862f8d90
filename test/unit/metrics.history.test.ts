/** The cluster history kept by the metrics service (services/metrics/history.ts): buckets, bounds, cards dropped. No broker. */
import { GpuHistory } from "../../services/metrics/history";
import { MAX_HISTORY_SAMPLES, parseMetricsSettings } from "../../services/metrics/settings";

const card = (uuid: string, utilization: number, memoryUsed = 1024) => ({
  uuid,
  index: 0,
  name: "NVIDIA GeForce RTX 3060",
  memoryTotal: 12288,
  memoryUsed,
  utilization,
  temperature: 50,
});
const T0 = Date.parse("2026-11-27T12:00:00.000Z");
const S = 1000;

describe("metrics - cluster history", () => {
  const history = (maxCards = 100) => new GpuHistory({ bucketMs: 10 * S, windowMs: 60 * S, maxCards });

  it("metrics history - heartbeats in one bucket become one sample, their mean; the next bucket a new one", () => {
    const h = history();
    h.record([card("GPU-a", 10, 1000)], T0 + 1 * S);
    h.record([card("GPU-a", 30, 2001)], T0 + 9 * S);
    h.record([card("GPU-a", 55, 4000)], T0 + 10 * S);
    expect(h.snapshot(T0 + 11 * S)).toEqual([
      {
        uuid: "GPU-a",
        samples: [
          { at: "2026-11-27T12:00:00.000Z", utilization: 20, memoryUsed: 1501, memoryTotal: 12288 },
          { at: "2026-11-27T12:00:10.000Z", utilization: 55, memoryUsed: 4000, memoryTotal: 12288 },
        ],
      },
    ]);
  });

  it("metrics history - a bucket with no heartbeat has no sample; a heartbeat older than the last bucket is not added", () => {
    const h = history();
    h.record([card("GPU-a", 10)], T0);
    h.record([card("GPU-a", 40)], T0 + 30 * S);
    h.record([card("GPU-a", 99)], T0 + 5 * S); // a clock stepped back
    expect(h.snapshot(T0 + 31 * S)[0].samples.map((s) => [s.at.slice(14, 19), s.utilization])).toEqual([
      ["00:00", 10],
      ["00:30", 40],
    ]);
  });

  it("metrics history - samples older than the window go; a card holds at most window/bucket + 1 samples", () => {
    const h = history();
    for (let t = 0; t <= 600; t += 2) h.record([card("GPU-a", t % 100)], T0 + t * S);
    const samples = h.snapshot(T0 + 600 * S)[0].samples;
    expect(samples.length).toBe(7); // buckets 540…600 s: the oldest still overlaps the window
    expect(samples[0].at).toBe(new Date(T0 + 540 * S).toISOString());
    expect(samples.at(-1)!.at).toBe(new Date(T0 + 600 * S).toISOString());
  });

  it("metrics history - a card not heard from for a whole window is dropped; others stay", () => {
    const h = history();
    h.record([card("GPU-gone", 10)], T0);
    h.record([card("GPU-live", 20)], T0 + 50 * S);
    expect(h.snapshot(T0 + 60 * S).map((c) => c.uuid)).toEqual(["GPU-gone", "GPU-live"]);
    expect(h.snapshot(T0 + 61 * S).map((c) => c.uuid)).toEqual(["GPU-live"]);
    expect(h.size).toBe(1);
  });

  it("metrics history - at most maxCards cards: the longest silent one is forgotten first", () => {
    const h = history(2);
    h.record([card("GPU-1", 1)], T0);
    h.record([card("GPU-2", 2)], T0 + 1 * S);
    h.record([card("GPU-1", 1)], T0 + 2 * S); // heard again: now the most recent
    h.record([card("GPU-3", 3)], T0 + 3 * S);
    expect(h.snapshot(T0 + 4 * S).map((c) => c.uuid)).toEqual(["GPU-1", "GPU-3"]);
  });

  it("metrics history - settings: defaults 10 s over an hour; a window shorter than a bucket or too many samples is refused, naming the variable", () => {
    expect(parseMetricsSettings({})).toMatchObject({ historyBucketS: 10, historyWindowS: 3600 });
    expect(() => parseMetricsSettings({ METRICS_HISTORY_BUCKET_S: "10", METRICS_HISTORY_WINDOW_S: "5" })).toThrow(/^METRICS_HISTORY_WINDOW_S must be/);
    expect(() => parseMetricsSettings({ METRICS_HISTORY_BUCKET_S: "0" })).toThrow(/^METRICS_HISTORY_BUCKET_S must be/);
    expect(() => parseMetricsSettings({ METRICS_HISTORY_BUCKET_S: "1", METRICS_HISTORY_WINDOW_S: String(MAX_HISTORY_SAMPLES + 1) })).toThrow(
      /^METRICS_HISTORY_WINDOW_S must be at most 720 × METRICS_HISTORY_BUCKET_S/,
    );
  });
});
