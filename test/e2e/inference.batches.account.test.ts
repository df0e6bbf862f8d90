/**
 * The Batch API and the account around it, through the HTTP gateway: a batch's status changes as
 * server-sent events (GET /v1/batches/:id/events, read by a real HTTP client; another account's
 * batch is 404); files count towards the account's storage quota (an upload that does not fit is
 * 403 insufficient_quota and stores nothing, a delete frees its bytes); a restricted token's
 * maxCredits is charged for its batch's lines, which fail with insufficient_quota once it is used.
 */
import OpenAI, { toFile } from "openai";
import { InferencePlatform, newAccount, openAiClient, openAiErrorOf, startInferencePlatform } from "../support/inference-platform";
import { clientIdOf, http, waitFor } from "../support/platform";
import { openEventStream, statusEvents } from "../support/sse";

const MODEL = "llama3.2:1b";
/** A chat line; `pad` characters of prompt make a file as large as a test needs. */
const chatLine = (customId: string, pad = 0) =>
  JSON.stringify({
    custom_id: customId,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model: MODEL, messages: [{ role: "user", content: customId + " ".repeat(pad) }] },
  });
const ids = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
const jsonl = (lines: string[]) => toFile(Buffer.from(lines.join("\n") + "\n"), "batch.jsonl");
const LIFECYCLE = ["validating", "in_progress", "finalizing", "completed"];

describe("inference - batches and the account: events, storage, token credits", () => {
  let p: InferencePlatform;
  const ended = (client: OpenAI, id: string) =>
    waitFor(
      async () => {
        const b = await client.batches.retrieve(id);
        return ["completed", "failed", "expired", "cancelled"].includes(b.status) ? b : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, message: `batch ${id} to end` },
    );
  const submit = async (client: OpenAI, lines: string[]) => {
    const file = await client.files.create({ file: await jsonl(lines), purpose: "batch" });
    return client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  };

  beforeAll(async () => {
    p = await startInferencePlatform(
      { BATCH_POLL_MS: "50", BATCH_CONCURRENCY: "4", CREDITS_PER_1K_TOKENS: "2" },
      { services: ["api-gateway", "auth", "inference", "usage"] },
    );
  });

  afterAll(async () => {
    await p?.stop();
  });

  beforeEach(() => p.ollama.set({}));

  test("inference - batches: GET /v1/batches/:id/events streams each status change once, in order, and ends with the batch done", async () => {
    p.ollama.set({ delayMs: 100 });
    const b = await submit(
      p.client,
      ids(8, "sse").map((c) => chatLine(c)),
    );
    const stream = await openEventStream(`${p.platform.baseUrl}/v1/batches/${b.id}/events`, p.apiKey);
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const { statuses, jobs: batches } = await statusEvents(stream);
    // Each status once, in the lifecycle's order (the first is the batch as it is when the stream opens).
    expect(statuses).toEqual(LIFECYCLE.filter((s) => statuses.includes(s)));
    expect(statuses).toContain("in_progress");
    expect(statuses.at(-1)).toBe("completed");
    expect(batches.at(-1)).toMatchObject({ id: b.id, object: "batch", request_counts: { total: 8, completed: 8, failed: 0 } });
    // A batch that ended: its stream is the batch once, then the end.
    expect((await statusEvents(await openEventStream(`${p.platform.baseUrl}/v1/batches/${b.id}/events`, p.apiKey))).statuses).toEqual(["completed"]);
  });

  test("inference - batches: a cancelled batch's stream ends with cancelling, then cancelled", async () => {
    p.ollama.set({ delayMs: 200 });
    const b = await submit(
      p.client,
      ids(20, "sse-cancel").map((c) => chatLine(c)),
    );
    const stream = await openEventStream(`${p.platform.baseUrl}/v1/batches/${b.id}/events`, p.apiKey);
    let block = await stream.next();
    while (block?.data?.status !== "in_progress") block = await stream.next();
    await p.client.batches.cancel(b.id);
    expect((await statusEvents(stream)).statuses).toEqual(["cancelling", "cancelled"]);
  });

  test("inference - batches: another account's batch events, and an unknown batch's, are 404 in OpenAI's shape; no credentials is 401", async () => {
    p.ollama.set({ delayMs: 100 });
    const b = await submit(
      p.client,
      ids(4, "sse-other").map((c) => chatLine(c)),
    );
    const other = await newAccount(p.platform.baseUrl);
    for (const [id, key] of [
      [b.id, other.apiKey],
      ["batch_nosuch", p.apiKey],
    ]) {
      const res = await fetch(`${p.platform.baseUrl}/v1/batches/${encodeURIComponent(id)}/events`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(404);
      expect((await res.json()).error).toMatchObject({ type: "invalid_request_error", code: "not_found" });
    }
    const badId = await fetch(`${p.platform.baseUrl}/v1/batches/${encodeURIComponent("bad id!")}/events`, { headers: { authorization: `Bearer ${p.apiKey}` } });
    expect(badId.status).toBe(400);
    expect((await badId.json()).error).toMatchObject({ param: "id" });
    expect((await fetch(`${p.platform.baseUrl}/v1/batches/${b.id}/events`)).status).toBe(401);
    await ended(p.client, b.id);
  });

  test("inference - batches: files count towards the storage quota: an upload that does not fit is 403 and stores nothing, a delete frees it", async () => {
    const account = await newAccount(p.platform.baseUrl);
    await p.db.query("INSERT INTO usage.quota_overrides (client_id, storage_mb) VALUES ($1, 1)", [clientIdOf(account.token)]);
    const client = openAiClient(p.platform.baseUrl, account.apiKey);
    const storage = async () => {
      const { quotas } = (await http(p.platform.baseUrl, "GET", "/api/quotas", { token: account.token })).body;
      return quotas.find((q: { resource: string }) => q.resource === "storageMb") as { limit: number; used: number };
    };
    // Each file: 1,000 lines of ~420 bytes, about 0.4 MiB.
    const bigFile = async (prefix: string) => jsonl(ids(1000, prefix).map((c) => chatLine(c, 300)));
    const a = await client.files.create({ file: await bigFile("a"), purpose: "batch" });
    expect((await storage()).used).toBeCloseTo(a.bytes / 2 ** 20, 2);
    const b = await client.files.create({ file: await bigFile("b"), purpose: "batch" });
    const refused = await openAiErrorOf(client.files.create({ file: await bigFile("c"), purpose: "batch" }));
    expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(refused.error).toMatchObject({ type: "insufficient_quota", code: "insufficient_quota" });
    expect((refused.error as { message: string }).message).toMatch(/storage quota is 1 MB/);
    expect((await client.files.list()).data.map((f) => f.id).sort()).toEqual([a.id, b.id].sort());
    expect((await storage()).used).toBeCloseTo((a.bytes + b.bytes) / 2 ** 20, 2);
    await client.files.delete(a.id);
    expect((await storage()).used).toBeCloseTo(b.bytes / 2 ** 20, 2);
    const c = await client.files.create({ file: await bigFile("c"), purpose: "batch" });
    expect((await client.files.list()).data.map((f) => f.id).sort()).toEqual([b.id, c.id].sort());
  });

  test("inference - batches: a restricted token's maxCredits is charged for its batch's lines; once used, the lines left fail with insufficient_quota", async () => {
    // Each line: 16 tokens at 2 credits per 1k, half price: 0.016 credits; 0.05 are used up by the 4th line.
    const created = await http(p.platform.baseUrl, "POST", "/api/auth/tokens", {
      token: p.token,
      body: { name: "capped", scopes: ["inference"], maxCredits: 0.05 },
    });
    expect(created.status).toBe(201);
    const capped = openAiClient(p.platform.baseUrl, created.body.token);
    p.ollama.set({ delayMs: 50 });
    // Read with the account's key: the token itself is refused by the gateway once its credits are used.
    const done = await ended(
      p.client,
      (
        await submit(
          capped,
          ids(20, "cap").map((c) => chatLine(c)),
        )
      ).id,
    );
    const { completed, failed } = done.request_counts!;
    // At most the lines in flight (BATCH_CONCURRENCY) when the limit was reached go past it.
    expect(completed).toBeGreaterThanOrEqual(4);
    expect(completed).toBeLessThanOrEqual(4 + 4);
    expect(done).toMatchObject({ status: "completed" });
    expect(completed + failed).toBe(20);
    const errors = (await (await p.client.files.content(done.error_file_id!)).text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(errors).toHaveLength(failed);
    for (const line of errors) expect(line).toMatchObject({ response: null, error: { code: "insufficient_quota" } });
    // The token's creditsUsed counts its batch lines (at the batch price); the gateway now refuses it too.
    const listed = await waitFor(
      async () => {
        const { tokens } = (await http(p.platform.baseUrl, "GET", "/api/auth/tokens", { token: p.token })).body;
        const t = tokens.find((x: { id: string }) => x.id === created.body.id);
        return t.creditsUsed >= completed * 0.016 - 1e-9 ? t : undefined;
      },
      { message: "the token's credits to reach auth" },
    );
    expect(listed.creditsUsed).toBeCloseTo(completed * 0.016, 6);
    const refused = await waitFor(async () => {
      const err = await openAiErrorOf(capped.batches.list());
      return err.status === 403 ? err : undefined;
    });
    expect(refused.error).toMatchObject({ code: "insufficient_quota" });
    // A batch of the account's key is not limited by the token's credits.
    expect((await ended(p.client, (await submit(p.client, [chatLine("key")])).id)).request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
  });
});
