/**
 * Per-account inference limits over an in-memory limiter with a fixed clock: requests counted on
 * arrival, tokens after the answer; the usage service's overrides read through a fake QuotaGate.
 */
import { MemoryRateLimiter } from "../../lib/rate-limiter";
import type { Standing } from "../../lib/quota-gate";
import { parseInferenceSettings } from "../../services/inference/settings";
import { parseUsageSettings } from "../../services/usage/settings";
import { InferenceLimit, InferenceRateLimits, UsageInferenceLimits } from "../../services/inference/rate-limits";

const limitsOf = (limit: InferenceLimit) => new InferenceRateLimits(new MemoryRateLimiter(() => 1_000), { limitFor: () => Promise.resolve(limit) });
const refusal = async (work: Promise<unknown>) => {
  try {
    await work;
  } catch (err) {
    return err as { type: string; code: number; data: { retryAfter: number; limit: string; headers: Record<string, string> } };
  }
  throw new Error("expected a refusal");
};

describe("inference - rate limits", () => {
  test("inference - unlimited (the default) counts nothing and sends no headers", async () => {
    const limits = limitsOf({ requestsPerMinute: null, tokensPerMinute: null });
    for (let i = 0; i < 100; i++) expect(await limits.admit("a")).toEqual({});
    await limits.charge("a", 1_000_000);
    expect(await limits.admit("a")).toEqual({});
  });

  test("inference - requests: the limit-th is allowed with 0 remaining, the next is 429 naming requests", async () => {
    const limits = limitsOf({ requestsPerMinute: 2, tokensPerMinute: null });
    expect(await limits.admit("a")).toEqual({ "x-ratelimit-limit-requests": "2", "x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "60s" });
    expect((await limits.admit("a"))["x-ratelimit-remaining-requests"]).toBe("0");
    const refused = await refusal(limits.admit("a"));
    expect([refused.type, refused.code, refused.data.limit, refused.data.retryAfter]).toEqual(["RATE_LIMITED", 429, "requests", 60]);
    expect(refused.data.headers["x-ratelimit-remaining-requests"]).toBe("0");
    // Another account has its own window.
    expect((await limits.admit("b"))["x-ratelimit-remaining-requests"]).toBe("1");
  });

  test("inference - tokens: charged after answers; refused once the window is at the limit, not before", async () => {
    const limits = limitsOf({ requestsPerMinute: null, tokensPerMinute: 100 });
    expect(await limits.admit("a")).toMatchObject({ "x-ratelimit-limit-tokens": "100", "x-ratelimit-remaining-tokens": "100" });
    await limits.charge("a", 60);
    expect((await limits.admit("a"))["x-ratelimit-remaining-tokens"]).toBe("40");
    // An answer may overshoot: the limit is checked before a request, tokens are known only after it.
    await limits.charge("a", 60);
    const refused = await refusal(limits.admit("a"));
    expect([refused.data.limit, refused.data.headers["x-ratelimit-remaining-tokens"]]).toEqual(["tokens", "0"]);
    await limits.charge("a", 0);
    await limits.charge("a", -5);
    expect((await refusal(limits.admit("a"))).data.limit).toBe("tokens");
  });

  test("inference - both limits: the headers of both; a refusal waits for the later window", async () => {
    const limits = limitsOf({ requestsPerMinute: 1, tokensPerMinute: 10 });
    expect(Object.keys(await limits.admit("a")).sort()).toEqual([
      "x-ratelimit-limit-requests",
      "x-ratelimit-limit-tokens",
      "x-ratelimit-remaining-requests",
      "x-ratelimit-remaining-tokens",
      "x-ratelimit-reset-requests",
      "x-ratelimit-reset-tokens",
    ]);
    await limits.charge("a", 10);
    const refused = await refusal(limits.admit("a"));
    expect(refused.data.limit).toBe("requests");
    expect(refused.data.retryAfter).toBe(60);
  });
});

describe("inference - limits from the usage service", () => {
  const ACCOUNT = "8f1d3c2a-5b6e-4f70-9a8b-0c1d2e3f4a5b";
  const DEFAULTS: InferenceLimit = { requestsPerMinute: 60, tokensPerMinute: null };
  const standingOf = (limits: InferenceLimit) => ({ clientId: ACCOUNT, limits, quotas: [], exceeded: null }) as unknown as Standing;
  const gateOf = (known: Map<string, Standing>) => {
    const asked: string[][] = [];
    return { asked, standings: (ids: readonly string[]) => (asked.push([...ids]), Promise.resolve(known)) };
  };

  test.each<[string, string, Map<string, Standing>, InferenceLimit]>([
    [
      "an override of both",
      ACCOUNT,
      new Map([[ACCOUNT, standingOf({ requestsPerMinute: 2, tokensPerMinute: 500 })]]),
      { requestsPerMinute: 2, tokensPerMinute: 500 },
    ],
    [
      "usage's unlimited default",
      ACCOUNT,
      new Map([[ACCOUNT, standingOf({ requestsPerMinute: null, tokensPerMinute: null })]]),
      { requestsPerMinute: null, tokensPerMinute: null },
    ],
    ["an account usage knows nothing of (usage down or absent): the environment's defaults", ACCOUNT, new Map(), DEFAULTS],
  ])("inference - %s", async (_name, clientId, known, expected) => {
    expect(await new UsageInferenceLimits(gateOf(known), DEFAULTS).limitFor(clientId)).toEqual(expected);
  });

  test("inference - an id that is no account id is never sent to usage: the defaults", async () => {
    const gate = gateOf(new Map([[ACCOUNT, standingOf({ requestsPerMinute: 1, tokensPerMinute: 1 })]]));
    expect(await new UsageInferenceLimits(gate, DEFAULTS).limitFor("'; DROP TABLE x; --")).toEqual(DEFAULTS);
    expect(gate.asked).toEqual([]);
  });

  test("inference - a standing the quota check just read is used as is: the gate is not asked again", async () => {
    const gate = gateOf(new Map([[ACCOUNT, standingOf({ requestsPerMinute: 1, tokensPerMinute: 1 })]]));
    const handed = standingOf({ requestsPerMinute: 7, tokensPerMinute: null });
    expect(await new UsageInferenceLimits(gate, DEFAULTS).limitFor(ACCOUNT, handed)).toEqual({ requestsPerMinute: 7, tokensPerMinute: null });
    expect(gate.asked).toEqual([]);
    // None handed over (the gate knew nothing): it is asked, as before.
    expect(await new UsageInferenceLimits(gate, DEFAULTS).limitFor(ACCOUNT, undefined)).toEqual({ requestsPerMinute: 1, tokensPerMinute: 1 });
    expect(gate.asked.length).toBe(1);
  });

  test("inference - an override counts: the third request of a 2-per-minute account is 429", async () => {
    const gate = gateOf(new Map([[ACCOUNT, standingOf({ requestsPerMinute: 2, tokensPerMinute: null })]]));
    const limits = new InferenceRateLimits(new MemoryRateLimiter(() => 1_000), new UsageInferenceLimits(gate, DEFAULTS));
    expect((await limits.admit(ACCOUNT))["x-ratelimit-limit-requests"]).toBe("2");
    await limits.admit(ACCOUNT);
    expect((await refusal(limits.admit(ACCOUNT))).type).toBe("RATE_LIMITED");
  });

  test.each([
    ["unset", {}],
    ["unlimited", { INFERENCE_RPM: "unlimited", INFERENCE_TPM: "Unlimited" }],
    ["numbers", { INFERENCE_RPM: "60", INFERENCE_TPM: " 1000 " }],
  ])("inference - INFERENCE_RPM/TPM %s: usage's default is inference's", (_name, env) => {
    const { requestsPerMinute, tokensPerMinute } = parseInferenceSettings(env);
    expect(parseUsageSettings(env).defaults).toMatchObject({ requestsPerMinute, tokensPerMinute });
  });

  test.each(["0", "-1", "1.5", "ten"])("inference - INFERENCE_RPM=%s is refused by usage as by inference (a 0 default would refuse everyone)", (raw) => {
    expect(() => parseInferenceSettings({ INFERENCE_RPM: raw })).toThrow(/^INFERENCE_RPM must be/);
    expect(() => parseUsageSettings({ INFERENCE_RPM: raw })).toThrow(/^INFERENCE_RPM must be/);
  });
});
