/**
 * Quotas overshoot by request speed (finding 5): a 10,000-token monthly quota, the default 2 s
 * quota cache, two inference replicas over NATS sharing Redis, a provider stand-in answering 100
 * tokens (12 prompt + 88 completion) to requests reserving 200 + the prompt. Sequentially no
 * request is admitted once the settled use reached the limit (overshoot 0 beyond the request that
 * crossed it); 20 at once overshoot by less than one request's reservation; a failed provider
 * call releases its reservation. Before the fix the cached standing let ~22× the quota through.
 * The same for credits: qwen priced at 10 credits per 1000 tokens (llama free), a 50-credit
 * monthly quota; each request reserves its 201 tokens at that price (2.01 credits) and settles 1.
 */
import { http, REDIS_URL, uniqueName, waitFor } from "../support/platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";
import { OllamaStandin } from "../support/provider-standins";

const LIMIT = 10_000;
const PER_ANSWER = 100; // the stand-in's 12 prompt + 88 completion tokens
const MAX_TOKENS = 200;
const RESERVATION = MAX_TOKENS + 1; // maxTokens + the prompt "hi" (about 1 token)
const CREDIT_LIMIT = 50;
const CREDITS_PER_TOKEN = 10 / 1000; // CREDITS_PER_1K_TOKENS for qwen
const PRICED = "qwen2.5:0.5b";

describe("quotas overshoot - monthly tokens reserved at admission on every replica", () => {
  let ollama: OllamaStandin;
  let platform: NatsPlatform;
  let base: string;

  const register = async () =>
    (await http(base, "POST", "/api/auth/register", { body: { email: `${uniqueName("q")}@example.com`, name: "q", password: "correct horse battery" } })).body
      .accessToken as string;
  const infer = (token: string, maxTokens = MAX_TOKENS, model = "llama3.2:1b") =>
    http(base, "POST", "/api/models/infer", { token, body: { model, prompt: "hi", maxTokens } });
  const ledgerTokens = async (token: string) => (await http(base, "GET", "/api/usage", { token })).body.inference.tokens as number;
  const ledgerCredits = async (token: string) => (await http(base, "GET", "/api/usage", { token })).body.credits as number;
  /** Requests one at a time until one is refused (at most `bound`): how many were answered, and the refusal. */
  const untilRefused = async (token: string, model: string, bound: number) => {
    let answered = 0;
    for (let i = 0; i < bound; i++) {
      const res = await infer(token, MAX_TOKENS, model);
      if (res.status !== 200) return { answered, refused: res };
      answered++;
    }
    return { answered, refused: undefined };
  };
  /** Rounds of 20 at once until a round is refused entirely (at most 20 rounds): how many were answered. */
  const inRounds = async (token: string, model: string) => {
    let answered = 0;
    for (let round = 0; round < 20; round++) {
      const statuses = await Promise.all(Array.from({ length: 20 }, () => infer(token, MAX_TOKENS, model).then((r) => r.status)));
      expect(statuses.every((s) => s === 200 || s === 403)).toBe(true);
      const ok = statuses.filter((s) => s === 200).length;
      answered += ok;
      if (!ok) break;
    }
    return answered;
  };

  beforeAll(async () => {
    ollama = await new OllamaStandin().start();
    ollama.set({ promptTokens: 12, completionTokens: 88 });
    platform = await startNatsPlatform({
      env: { QUOTA_TOKENS_PER_MONTH: String(LIMIT), QUOTA_CREDITS_PER_MONTH: String(CREDIT_LIMIT), REDIS_URL },
      local: ["api-gateway", "auth", "usage"],
      // The prices only usage knows: the replicas reserve at those the standing carries.
      localEnv: { CREDITS_PER_1K_TOKENS: JSON.stringify({ default: 0, qwen: CREDITS_PER_TOKEN * 1000 }) },
      route: ["GET", "/api/quotas"],
    });
    base = platform.baseUrl;
    await platform.replicas("inference", 2, { OLLAMA_URL: ollama.url });
  }, 90_000);

  afterAll(async () => {
    await platform?.stop();
    await ollama?.stop();
  });

  it("quotas overshoot - sequential: the request after the one that reached the limit is 403 on either replica (overshoot 0)", async () => {
    const token = await register();
    const { answered, refused } = await untilRefused(token, "llama3.2:1b", (4 * LIMIT) / PER_ANSWER); // 4× the requests the quota allows
    const total = answered * PER_ANSWER;
    console.log(`quota overshoot, sequential: ${answered} answered, ${total} tokens of ${LIMIT}, overshoot ${Math.max(0, total - LIMIT)}`);
    expect(refused?.status).toBe(403);
    expect(refused?.body.error).toMatchObject({ code: "QUOTA_EXCEEDED", details: { resource: "tokens", limit: LIMIT, used: total } });
    // Every answer was admitted below the limit, and the one that reached it was the last.
    expect((answered - 1) * PER_ANSWER).toBeLessThan(LIMIT);
    expect(total).toBeGreaterThanOrEqual(LIMIT);
    for (let i = 0; i < 4; i++) expect((await infer(token)).status).toBe(403); // both replicas, round-robin
    await waitFor(async () => (await ledgerTokens(token)) === total, { message: "every answer in the ledger" });
  });

  it("quotas overshoot - 20 concurrent requests overshoot by less than one request's reservation", async () => {
    const token = await register();
    const answered = await inRounds(token, "llama3.2:1b"); // 20 rounds are 4× the quota
    const total = answered * PER_ANSWER;
    console.log(
      `quota overshoot, 20 concurrent: ${answered} answered, ${total} tokens of ${LIMIT}, overshoot ${Math.max(0, total - LIMIT)} (one reservation: ${RESERVATION})`,
    );
    expect(total).toBeGreaterThanOrEqual(LIMIT);
    expect(total - LIMIT).toBeLessThan(RESERVATION);
    await waitFor(async () => (await ledgerTokens(token)) === total, { message: "every answer in the ledger" });
  });

  it("quotas overshoot - a failed provider call releases its reservation, a finished stream settles it, an invalid request holds nothing", async () => {
    const token = await register();
    ollama.set({ fail: { status: 500, message: "boom" } });
    try {
      // Two reservations of 6,000: held on, the pair alone would fill the quota.
      for (let i = 0; i < 2; i++) expect((await infer(token, 6000)).status).toBe(502);
    } finally {
      ollama.set({ promptTokens: 12, completionTokens: 88 });
    }
    expect((await infer(token, 9000)).status).toBe(400); // over the field's maximum: nothing held
    // Two streams reserving 6,000 each: their end settles them with the 100 tokens used.
    for (let i = 0; i < 2; i++) {
      const streamed = await http(base, "POST", "/api/models/infer", { token, body: { model: "llama3.2:1b", prompt: "hi", maxTokens: 6000, stream: true } });
      expect(streamed.status).toBe(200);
    }
    for (let i = 0; i < 4; i++) expect((await infer(token)).status).toBe(200);
    expect(await waitFor(async () => ((await ledgerTokens(token)) === 6 * PER_ANSWER ? true : false), { message: "6 answers counted" })).toBe(true);
  });

  it("quotas overshoot - credits, sequential: the request after the one that reached the credit limit is 403 on either replica (overshoot 0)", async () => {
    const token = await register();
    const perAnswer = PER_ANSWER * CREDITS_PER_TOKEN;
    const { answered, refused } = await untilRefused(token, PRICED, (4 * CREDIT_LIMIT) / perAnswer); // 4× the requests the credits allow
    const credits = answered * perAnswer;
    console.log(`credits overshoot, sequential: ${answered} answered, ${credits} credits of ${CREDIT_LIMIT}, overshoot ${Math.max(0, credits - CREDIT_LIMIT)}`);
    expect(refused?.status).toBe(403);
    expect(refused?.body.error).toMatchObject({ code: "QUOTA_EXCEEDED", details: { resource: "credits", limit: CREDIT_LIMIT, used: credits } });
    expect((answered - 1) * perAnswer).toBeLessThan(CREDIT_LIMIT);
    expect(credits).toBeGreaterThanOrEqual(CREDIT_LIMIT);
    for (let i = 0; i < 4; i++) expect((await infer(token, MAX_TOKENS, PRICED)).status).toBe(403);
    // A free model is refused too: the credits are used up, whatever this request would cost.
    expect((await infer(token)).body.error?.details?.resource).toBe("credits");
    await waitFor(async () => (await ledgerCredits(token)) === credits, { message: "every answer's credits in the ledger" });
  });

  it("quotas overshoot - credits, 20 concurrent requests overshoot by less than one request's reservation at the model's price", async () => {
    const token = await register();
    const answered = await inRounds(token, PRICED); // 20 rounds are 8× the credits
    const credits = answered * PER_ANSWER * CREDITS_PER_TOKEN;
    const reservation = RESERVATION * CREDITS_PER_TOKEN;
    console.log(
      `credits overshoot, 20 concurrent: ${answered} answered, ${credits} credits of ${CREDIT_LIMIT}, overshoot ${Math.max(0, credits - CREDIT_LIMIT)} (one reservation: ${reservation.toFixed(2)})`,
    );
    expect(credits).toBeGreaterThanOrEqual(CREDIT_LIMIT);
    expect(credits - CREDIT_LIMIT).toBeLessThan(reservation);
    await waitFor(async () => (await ledgerCredits(token)) === credits, { message: "every answer's credits in the ledger" });
  });
});
