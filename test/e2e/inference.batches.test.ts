/**
 * The Batch API through the HTTP gateway with the official `openai` client as the real client:
 * upload a JSONL, create a batch, poll it to its end, read the output and error files keyed by
 * custom_id; bad files refused with their line numbers (nothing stored); another account's
 * files and batches are 404; a provider failing is retried; cancellation keeps what finished;
 * a batch past its window expires; tokens count in usage at the batch credit price; a batch's end
 * is a signed webhook when the account has a secret.
 */
import OpenAI, { toFile } from "openai";
import { Webhook } from "standardwebhooks";
import { InferencePlatform, newAccount, openAiClient, openAiErrorOf, startInferencePlatform } from "../support/inference-platform";
import { clientIdOf, http, waitFor } from "../support/platform";
import { Receiver, startReceiver } from "../support/webhook-receiver";

const MODEL = "llama3.2:1b";
const chatLine = (customId: string, model = MODEL) =>
  JSON.stringify({ custom_id: customId, method: "POST", url: "/v1/chat/completions", body: { model, messages: [{ role: "user", content: customId }] } });
const jsonl = (lines: string[]) => toFile(Buffer.from(lines.join("\n") + "\n"), "batch.jsonl");
const ids = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

describe("inference - the Batch API (/v1/files, /v1/batches) with the openai client", () => {
  let p: InferencePlatform;
  let client: OpenAI;
  let receiver: Receiver;
  /** The chat requests the Ollama stand-in received for `customId` (each line's prompt is its custom_id). */
  const callsFor = (customId: string) => p.ollama.requests.filter((r) => r.path === "/api/chat" && r.body?.messages?.[0]?.content === customId).length;
  const finished = (id: string, statuses = ["completed", "failed", "expired", "cancelled"]) =>
    waitFor(
      async () => {
        const b = await client.batches.retrieve(id);
        return statuses.includes(b.status) ? b : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, message: `batch ${id} to end` },
    );
  const linesOf = async (fileId: string | null | undefined) => {
    const text = await (await client.files.content(fileId!)).text();
    return new Map(
      text
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l))
        .map((l) => [l.custom_id as string, l]),
    );
  };
  const submit = async (lines: string[], metadata?: Record<string, string>) => {
    const file = await client.files.create({ file: await jsonl(lines), purpose: "batch" });
    return client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata });
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    p = await startInferencePlatform(
      { WEBHOOK_ALLOW_PRIVATE: "true", BATCH_POLL_MS: "50", BATCH_RETRY_BASE_MS: "50", BATCH_CONCURRENCY: "4", CREDITS_PER_1K_TOKENS: "2" },
      {
        services: ["api-gateway", "auth", "inference", "usage"],
      },
    );
    client = p.client;
  });

  afterAll(async () => {
    await p?.stop();
    await receiver?.close();
  });

  beforeEach(() => {
    p.ollama.set({});
    p.vllm.set({});
  });

  test("inference - batches: files.create, batches.create, poll to completed, output keyed by custom_id, each line run once", async () => {
    const customIds = ids(25, "ok");
    const file = await client.files.create({ file: await jsonl(customIds.map((c) => chatLine(c))), purpose: "batch" });
    expect(file).toMatchObject({ object: "file", purpose: "batch", filename: "batch.jsonl", status: "processed", bytes: expect.any(Number) });
    expect(await client.files.retrieve(file.id)).toMatchObject({ id: file.id, object: "file" });
    const created = await client.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/chat/completions",
      completion_window: "24h",
      metadata: { job: "eval" },
    });
    expect(created).toMatchObject({ object: "batch", status: "validating", input_file_id: file.id, metadata: { job: "eval" }, completion_window: "24h" });
    const done = await finished(created.id);
    expect(done).toMatchObject({ status: "completed", request_counts: { total: 25, completed: 25, failed: 0 }, error_file_id: null });
    expect(done.completed_at).toBeGreaterThanOrEqual(done.created_at);
    expect(done.finalizing_at).toEqual(expect.any(Number));
    const output = await linesOf(done.output_file_id);
    expect([...output.keys()].sort()).toEqual([...customIds].sort());
    expect(output.get("ok-3")).toMatchObject({
      id: expect.stringMatching(/^batch_req_/),
      custom_id: "ok-3",
      error: null,
      response: { status_code: 200, request_id: expect.any(String), body: { object: "chat.completion", model: MODEL, usage: { total_tokens: 16 } } },
    });
    expect(output.get("ok-3").response.body.choices[0].message.content).toBe("Hello, world!");
    for (const c of customIds) expect(callsFor(c)).toBe(1);
    // The output file is the account's, listed with purpose batch_output; the batch is listed too.
    expect(await client.files.retrieve(done.output_file_id!)).toMatchObject({ purpose: "batch_output" });
    const listed = [];
    for await (const b of client.batches.list({ limit: 1 })) listed.push(b.id);
    expect(listed).toContain(created.id);
  });

  test("inference - batches: tokens count in usage under the model at half the credit price", async () => {
    const before = (await client.batches.list()).data.length;
    const b = await submit(ids(4, "usage").map((c) => chatLine(c)));
    await finished(b.id);
    const usage = async () => (await fetch(`${p.platform.baseUrl}/api/usage`, { headers: { authorization: `Bearer ${p.token}` } })).json();
    // Batch tokens: 4 × 16 at 2 credits per 1k, half price → 0.064 credits (on top of the earlier tests' batches).
    const view = await waitFor(
      async () => {
        const u = await usage();
        return u.inference?.tokens >= (25 + 4) * 16 ? u : undefined;
      },
      { message: "batch tokens to reach usage" },
    );
    expect(before).toBeGreaterThanOrEqual(1);
    expect(view.inference.byModel[MODEL]).toBe(view.inference.tokens);
    expect(view.credits).toBeCloseTo((view.inference.tokens / 1000) * 2 * 0.5, 6);
  });

  test("inference - batches: a bad file is 400 naming its lines, and nothing is stored", async () => {
    const before = (await client.files.list()).data.length;
    const bad = [chatLine("a"), "{not json", chatLine("a"), JSON.stringify({ custom_id: "b", method: "POST", url: "/v1/images", body: {} }), chatLine("c", "")];
    const err = await openAiErrorOf(client.files.create({ file: await jsonl(bad), purpose: "batch" }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error).toMatchObject({ type: "invalid_request_error", param: "file" });
    const message = (err.error as { message: string }).message;
    for (const expected of ["line 2: is not valid JSON", 'line 3: custom_id "a" is already used on line 1', "line 4: url must be", "line 5: body.model"])
      expect(message).toContain(expected);
    const purpose = await openAiErrorOf(client.files.create({ file: await jsonl([chatLine("x")]), purpose: "fine-tune" }));
    expect(purpose.status).toBe(400);
    expect(purpose.error).toMatchObject({ param: "purpose" });
    const mismatch = await client.files.create({ file: await jsonl([chatLine("x")]), purpose: "batch" });
    const endpoint = await openAiErrorOf(client.batches.create({ input_file_id: mismatch.id, endpoint: "/v1/embeddings", completion_window: "24h" }));
    expect(endpoint.error).toMatchObject({ param: "endpoint" });
    expect((await client.files.list()).data.length).toBe(before + 1);
  });

  test("inference - batches: another account's files and batches are 404, its list is empty", async () => {
    const b = await submit([chatLine("mine")]);
    const other = openAiClient(p.platform.baseUrl, (await newAccount(p.platform.baseUrl)).apiKey);
    for (const call of [
      other.files.retrieve(b.input_file_id),
      other.files.content(b.input_file_id),
      other.files.delete(b.input_file_id),
      other.batches.retrieve(b.id),
      other.batches.cancel(b.id),
      other.batches.create({ input_file_id: b.input_file_id, endpoint: "/v1/chat/completions", completion_window: "24h" }),
    ]) {
      const err = await openAiErrorOf(call);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    }
    expect((await other.batches.list()).data).toEqual([]);
    expect((await other.files.list()).data).toEqual([]);
    await finished(b.id);
  });

  test("inference - batches: a provider failing is retried; an unknown model lands in the error file", async () => {
    p.ollama.set({ fail: { status: 500, message: "overloaded" } });
    const b = await submit([chatLine("retried"), chatLine("unknown", "no-such-model")]);
    await waitFor(() => callsFor("retried") >= 2, { message: "the failing line to be tried again" });
    p.ollama.set({});
    const done = await finished(b.id);
    expect(done).toMatchObject({ status: "completed", request_counts: { total: 2, completed: 1, failed: 1 } });
    expect((await linesOf(done.output_file_id)).get("retried").response.status_code).toBe(200);
    const errors = await linesOf(done.error_file_id);
    expect(errors.get("unknown")).toMatchObject({ response: { status_code: 404, body: { error: { code: "model_not_found" } } }, error: null });
  });

  test("inference - batches: cancel stops the lines not started and keeps what finished", async () => {
    p.ollama.set({ delayMs: 150 });
    const b = await submit(ids(40, "cancel").map((c) => chatLine(c)));
    await waitFor(async () => (await client.batches.retrieve(b.id)).request_counts!.completed >= 2, { message: "some lines to finish" });
    const cancelling = await client.batches.cancel(b.id);
    expect(cancelling.status).toBe("cancelling");
    const done = await finished(b.id, ["cancelled"]);
    const { completed, failed, total } = done.request_counts!;
    expect(total).toBe(40);
    expect(completed).toBeLessThan(40);
    expect(failed).toBe(0);
    expect((await linesOf(done.output_file_id)).size).toBe(completed);
    // The lines never run leave with the rest once the files are written.
    expect((await p.db.query("SELECT count(*)::int AS n FROM inference.batch_lines WHERE batch_id = $1", [b.id])).rows[0].n).toBe(0);
    // Cancelling again answers the batch as it is; a completed batch cannot be cancelled.
    expect((await client.batches.cancel(b.id)).status).toBe("cancelled");
    p.ollama.set({});
    const late = await finished((await submit([chatLine("late")])).id);
    expect((await openAiErrorOf(client.batches.cancel(late.id))).status).toBe(409);
  });

  test("inference - batches: a batch past its window expires, the lines left failed with batch_expired", async () => {
    p.ollama.set({ delayMs: 200 });
    const b = await submit(ids(20, "exp").map((c) => chatLine(c)));
    await waitFor(async () => (await client.batches.retrieve(b.id)).status === "in_progress", { message: "the batch to start" });
    await p.db.query("UPDATE inference.batches SET expires_at = now() WHERE id = $1", [b.id]);
    const done = await finished(b.id);
    expect(done.status).toBe("expired");
    expect(done.request_counts!.failed).toBeGreaterThan(0);
    const errors = await linesOf(done.error_file_id);
    expect([...errors.values()][0]).toMatchObject({ response: null, error: { code: "batch_expired" } });
    expect(done.request_counts!.completed + done.request_counts!.failed).toBe(20);
  });

  test("inference - batches: the end is a signed batch.completed webhook once the account has a secret, none before", async () => {
    const unsigned = await submit([chatLine("nohook")], { webhookUrl: receiver.url("/none") });
    await finished(unsigned.id);
    const webhookOf = async (id: string) => (await p.db.query("SELECT webhook_status FROM inference.batches WHERE id = $1", [id])).rows[0].webhook_status;
    await waitFor(async () => (await webhookOf(unsigned.id)) === "failed", { message: "the webhook without a secret to be given up" });
    const { webhookSecret } = (await http(p.platform.baseUrl, "POST", "/api/auth/webhook-secret", { token: p.token })).body;
    const b = await submit([chatLine("hook")], { webhookUrl: receiver.url("/batch") });
    const [delivery] = await waitFor(() => (receiver.to("/batch").length ? receiver.to("/batch") : undefined), { message: "the batch webhook" });
    const event = new Webhook(webhookSecret).verify(delivery.body, delivery.headers) as { type: string; data: OpenAI.Batch };
    expect(event).toMatchObject({
      type: "batch.completed",
      data: { id: b.id, object: "batch", status: "completed", request_counts: { total: 1, completed: 1 } },
    });
    expect(receiver.to("/none")).toEqual([]);
    const refused = await openAiErrorOf(submit([chatLine("x")], { webhookUrl: "ftp://example.com" }));
    expect(refused.error).toMatchObject({ param: "metadata.webhookUrl" });
  });

  test("inference - batches: the monthly token quota stops a batch: the lines left fail with insufficient_quota", async () => {
    const account = await newAccount(p.platform.baseUrl);
    await p.db.query("INSERT INTO usage.quota_overrides (client_id, tokens) VALUES ($1, 40)", [clientIdOf(account.token)]);
    const limited = openAiClient(p.platform.baseUrl, account.apiKey);
    const lines = ids(12, "quota").map((c) =>
      JSON.stringify({
        custom_id: c,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: MODEL, max_tokens: 4, messages: [{ role: "user", content: c }] },
      }),
    );
    const file = await limited.files.create({ file: await jsonl(lines), purpose: "batch" });
    const b = await limited.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const done = await waitFor(
      async () => {
        const x = await limited.batches.retrieve(b.id);
        return x.status === "completed" ? x : undefined;
      },
      { timeoutMs: 20_000, message: "the limited batch to end" },
    );
    const { completed, failed } = done.request_counts!;
    // Each line holds its estimate (max_tokens + the prompt's) and uses 16 (the stand-in's count): at most
    // the lines in flight (BATCH_CONCURRENCY) when the quota ran out go past it, none after.
    expect(completed).toBeGreaterThanOrEqual(1);
    expect(completed * 16).toBeLessThanOrEqual(40 + 4 * 16);
    expect(completed + failed).toBe(12);
    const errors = (await (await limited.files.content(done.error_file_id!)).text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(errors).toHaveLength(failed);
    for (const line of errors) expect(line).toMatchObject({ response: null, error: { code: "insufficient_quota" } });
  });

  test("inference - batches: a restricted token needs the inference scope, and its batch only its models (403 naming the line)", async () => {
    const tokenWith = async (body: Record<string, unknown>) =>
      (await http(p.platform.baseUrl, "POST", "/api/auth/tokens", { token: p.token, body: { name: "batch", ...body } })).body.token as string;
    const jobsOnly = openAiClient(p.platform.baseUrl, await tokenWith({ scopes: ["jobs:read"] }));
    expect((await openAiErrorOf(jobsOnly.files.create({ file: await jsonl([chatLine("s")]), purpose: "batch" }))).status).toBe(403);
    const qwenOnly = openAiClient(p.platform.baseUrl, await tokenWith({ scopes: ["inference"], models: ["qwen2.5:0.5b"] }));
    const file = await qwenOnly.files.create({ file: await jsonl([chatLine("q", "qwen2.5:0.5b"), chatLine("l")]), purpose: "batch" });
    const refused = await openAiErrorOf(qwenOnly.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }));
    expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((refused.error as { message: string }).message).toContain("line 2");
    const ok = await qwenOnly.files.create({ file: await jsonl([chatLine("q2", "qwen2.5:0.5b")]), purpose: "batch" });
    const b = await qwenOnly.batches.create({ input_file_id: ok.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect((await finished(b.id)).request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
  });

  test("inference - batches: a batch whose input file is gone before its lines were copied fails, saying why", async () => {
    const id = `batch_gone${Date.now()}`;
    await p.db.query(
      `INSERT INTO inference.batches (id, client_id, endpoint, input_file_id, completion_window, status, expires_at)
       VALUES ($1, $2, '/v1/chat/completions', 'file-gone', '24h', 'validating', now() + interval '1 day')`,
      [id, clientIdOf(p.token)],
    );
    const failed = await finished(id);
    expect(failed).toMatchObject({ status: "failed", errors: { object: "list", data: [{ code: "invalid_input_file", param: "input_file_id" }] } });
    expect(failed.failed_at).toEqual(expect.any(Number));
  });
});
