/** Per-account inference limits over an in-memory limiter with a fixed clock: requests counted on arrival, tokens after the answer. */
import { MemoryRateLimiter } from "../../lib/rate-limiter";
import { EnvInferenceLimits, InferenceLimit, InferenceRateLimits } from "../../services/inference/rate-limits";

const limitsOf = (limit: InferenceLimit) => new InferenceRateLimits(new MemoryRateLimiter(() => 1_000), new EnvInferenceLimits(limit));
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
