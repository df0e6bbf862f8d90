/**
 * Usage totals on the Prometheus endpoint: the metrics service asks `usage.stats` and publishes
 * GPU-seconds, tokens, storage MB-hours and credits of all accounts together, never per account
 * (no label names an account); a redelivered batch counts once there as in the ledger.
 */
import { randomUUID } from "crypto";
import { ownChannel, sendToChannel } from "../../lib/channels";
import { metricsPortOf } from "../../lib/metrics";
import { gpuUsageKey, inferenceUsageKey, storageUsageKey, USAGE_CHANNEL, UsageBatch } from "../../lib/usage-protocol";
import { startTestPlatform, TestPlatform, waitFor } from "../support/platform";
import { findSamples, parsePrometheus, Sample } from "../support/prometheus";

const NAMES = ["platform_usage_gpu_seconds_total", "platform_usage_tokens_total", "platform_usage_storage_mb_hours_total", "platform_usage_credits_total"];

describe("usage metrics - totals per resource on /metrics", () => {
  let platform: TestPlatform;
  let metricsUrl: string;
  const alice = randomUUID();
  const bob = randomUUID();
  const scrape = async () => {
    const text = await (await fetch(metricsUrl)).text();
    return { text, samples: parsePrometheus(text) };
  };
  const totals = (samples: Sample[]) => NAMES.map((n) => findSamples(samples, n)[0]?.value);
  const publish = (batch: UsageBatch) => sendToChannel(platform.broker, ownChannel(USAGE_CHANNEL, platform.broker.nodeID), batch);

  beforeAll(async () => {
    platform = await startTestPlatform({
      services: ["usage", "metrics"],
      env: {
        METRICS_COLLECT_INTERVAL_S: "0.2",
        CREDITS_PER_GPU_SECOND: '{"A100": 2, "default": 1}',
        CREDITS_PER_1K_TOKENS: "0.5",
        CREDITS_PER_GB_HOUR: "3",
      },
    });
    metricsUrl = `http://127.0.0.1:${await waitFor(() => metricsPortOf(platform.broker), { message: "metrics port" })}/metrics`;
  });

  afterAll(() => platform?.stop());

  it("usage metrics - an empty ledger is 0 for every resource", async () => {
    const { samples } = await waitFor(
      async () => {
        const s = await scrape();
        return totals(s.samples).every((v) => v === 0) ? s : false;
      },
      { message: "usage totals at 0" },
    );
    expect(totals(samples)).toEqual([0, 0, 0, 0]);
  });

  it("usage metrics - records of two accounts sum per resource, priced; a redelivery changes nothing; no account label", async () => {
    const t0 = new Date(Date.UTC(2030, 0, 15, 10, 0, 0));
    const at = (s: number) => new Date(t0.getTime() + s * 1000).toISOString();
    const batch: UsageBatch = {
      records: [
        { key: gpuUsageKey(randomUUID(), 1), clientId: alice, resource: "gpu", name: "NVIDIA A100", start: at(0), end: at(100), quantity: 2 },
        { key: gpuUsageKey(randomUUID(), 1), clientId: bob, resource: "gpu", name: "Tesla T4", start: at(0), end: at(50), quantity: 1 },
        { key: inferenceUsageKey(randomUUID()), clientId: alice, resource: "inference", name: "llama3.2:1b", start: at(5), end: at(5), quantity: 1200 },
        { key: inferenceUsageKey(randomUUID()), clientId: bob, resource: "inference", name: "qwen2.5:0.5b", start: at(6), end: at(6), quantity: 800 },
        { key: storageUsageKey(randomUUID(), t0), clientId: bob, resource: "storage", name: "postgresql", start: at(0), end: at(3600), quantity: 300 },
      ],
    };
    await publish(batch);
    await publish(batch); // redelivered: the same keys
    await publish({ records: [{ ...batch.records[2], key: inferenceUsageKey(randomUUID()), quantity: 1 }] }); // the last one in, so the first two are in
    const expected = [200 + 50, 2001, 300, 200 * 2 + 50 * 1 + (2001 / 1000) * 0.5 + (300 / 1024) * 3];
    const { text, samples } = await waitFor(
      async () => {
        const s = await scrape();
        return totals(s.samples)[1] === 2001 ? s : false;
      },
      { message: "usage totals after the batches" },
    );
    const got = totals(samples);
    expect(got.slice(0, 3)).toEqual(expected.slice(0, 3));
    expect(got[3]).toBeCloseTo(expected[3], 5);
    // One series per resource, labelled only with where it was measured: nothing per account.
    for (const name of NAMES) {
      expect(findSamples(samples, name)).toHaveLength(1);
      expect(Object.keys(findSamples(samples, name)[0].labels).sort()).toEqual(["namespace", "nodeID"]);
    }
    expect(text).not.toContain(alice);
    expect(text).not.toContain(bob);
  });
});
