/**
 * Batch lines paced behind interactive requests (services/inference/batches/batch-pace.ts), seen from
 * the provider: the stand-in counts the batch lines and interactive chats in flight as each request
 * arrives. With interactive chats going on, the batch lines in flight fall to BATCH_PACED_IN_FLIGHT
 * and stay there; once the chats stop they rise to BATCH_CONCURRENCY again, no sooner than
 * BATCH_PACE_IDLE_MS after the last one ended; a streamed chat holds them there until it ends; and a
 * batch still completes under continuous interactive load. The platform runs with Redis, so the cross-replica signal is on the path.
 */
import OpenAI, { toFile } from "openai";
import { InferencePlatform, startInferencePlatform } from "../support/inference-platform";
import { REDIS_URL, waitFor } from "../support/platform";
import type { Arrival, RecordedRequest } from "../support/standin-server";

const MODEL = "llama3.2:1b";
const PER_ACCOUNT = 6; // BATCH_CONCURRENCY
const FLOOR = 1; // BATCH_PACED_IN_FLIGHT
const IDLE_MS = 400; // BATCH_PACE_IDLE_MS
const DELAY_MS = 60; // the stand-in's answer time

const chatLine = (customId: string) =>
  JSON.stringify({ custom_id: customId, method: "POST", url: "/v1/chat/completions", body: { model: MODEL, messages: [{ role: "user", content: customId }] } });
const ids = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
/** Batch lines' prompts are their custom_id ("line-…"); interactive chats' are "chat …". */
const kindOf = (r: RecordedRequest) =>
  r.path !== "/api/chat" ? undefined : String(r.body?.messages?.[0]?.content).startsWith("line-") ? "batch" : "interactive";

/** Sequential interactive chats (concurrency 1) until stopped; stop() resolves with when the last one ended. */
function chatting(client: OpenAI) {
  let running = true;
  let lastEndedAt = 0;
  let sent = 0;
  const loop = (async () => {
    while (running) {
      await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `chat ${sent++}` }] });
      lastEndedAt = Date.now();
    }
  })();
  return {
    get running() {
      return running;
    },
    async stop() {
      running = false;
      await loop;
      return lastEndedAt;
    },
  };
}

describe("inference - batch lines paced behind interactive requests", () => {
  let p: InferencePlatform;
  const arrivals: Arrival[] = [];
  /** Batch lines in flight at the stand-in just after each batch line's arrival (itself counted), from `from` on. */
  const batchPeakSince = (from: number) => Math.max(0, ...arrivals.filter((a, i) => i >= from && a.kind === "batch").map((a) => (a.inFlight.batch ?? 0) + 1));
  const submit = async (lines: string[]) => {
    const file = await p.client.files.create({ file: await toFile(Buffer.from(lines.join("\n") + "\n"), "batch.jsonl"), purpose: "batch" });
    return p.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  };
  const ended = (id: string) =>
    waitFor(
      async () => {
        const b = await p.client.batches.retrieve(id);
        return ["completed", "failed", "expired", "cancelled"].includes(b.status) ? b : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 100, message: `batch ${id} to end` },
    );

  beforeAll(async () => {
    p = await startInferencePlatform({
      REDIS_URL,
      BATCH_POLL_MS: "50",
      BATCH_CONCURRENCY: String(PER_ACCOUNT),
      BATCH_PACED_IN_FLIGHT: String(FLOOR),
      BATCH_PACE_IDLE_MS: String(IDLE_MS),
    });
    p.ollama.classify = kindOf;
    p.ollama.on("arrival", (a: Arrival) => arrivals.push(a));
  });

  afterAll(async () => {
    await p?.stop();
  });

  test("inference - batches: lines in flight fall to the floor while interactive chats run, and rise again once they are idle", async () => {
    p.ollama.set({ delayMs: DELAY_MS });
    const b = await submit(ids(150, "line-a").map(chatLine));
    // Alone, the batch runs BATCH_CONCURRENCY lines at once.
    await waitFor(() => batchPeakSince(0) >= PER_ACCOUNT, { timeoutMs: 20_000, message: `${PER_ACCOUNT} batch lines in flight` });
    expect(batchPeakSince(0)).toBe(PER_ACCOUNT);

    const chatsFrom = arrivals.length;
    const chatsAt = Date.now();
    const chats = chatting(p.client);
    try {
      await paced(chatsFrom, chatsAt);
    } finally {
      await chats.stop();
    }
    await idle(b.id, chats);
  });

  /** With chats going on since `chatsAt`, the batch lines fall to the floor and stay there. */
  async function paced(chatsFrom: number, chatsAt: number) {
    // The lines in flight when the chats began finish (on a loaded machine, lines claimed just before may reach
    // the provider a little later): a chat a second on finds no more than the floor beside it.
    const settled = await waitFor(
      () => {
        const i = arrivals.findIndex((a, j) => j >= chatsFrom && a.kind === "interactive" && a.at - chatsAt >= 1_000 && (a.inFlight.batch ?? 0) <= FLOOR);
        return i >= 0 ? i + 1 : undefined;
      },
      { timeoutMs: 20_000, message: "an interactive chat with the batch at its floor beside it" },
    );
    // From then on, over the next 15 chats: every chat and every batch line finds at most the floor of lines in flight.
    await waitFor(() => arrivals.slice(settled).filter((a) => a.kind === "interactive").length >= 15, { timeoutMs: 30_000, message: "15 more chats" });
    const window = arrivals.slice(settled);
    const paced = window.filter((a) => a.kind === "interactive").map((a) => a.inFlight.batch ?? 0);
    expect(Math.max(...paced)).toBeLessThanOrEqual(FLOOR);
    expect(batchPeakSince(settled)).toBeLessThanOrEqual(FLOOR);
    // …and the batch kept going meanwhile (the floor is not zero).
    expect(window.filter((a) => a.kind === "batch").length).toBeGreaterThan(0);
  }

  /** Once the chats stopped, the batch lines rise to BATCH_CONCURRENCY again, no sooner than BATCH_PACE_IDLE_MS after the last. */
  async function idle(batchId: string, chats: ReturnType<typeof chatting>) {
    const from = arrivals.length;
    const lastChatEndedAt = await chats.stop();
    // Idle: back to BATCH_CONCURRENCY, no sooner than BATCH_PACE_IDLE_MS after the last chat ended.
    await waitFor(() => batchPeakSince(from) >= PER_ACCOUNT, { timeoutMs: 20_000, message: "the batch back at full concurrency" });
    const rise = arrivals.find((a, i) => i >= from && a.kind === "batch" && (a.inFlight.batch ?? 0) + 1 > FLOOR)!;
    expect(rise.at - lastChatEndedAt).toBeGreaterThanOrEqual(IDLE_MS - 20);
    expect((await ended(batchId)).request_counts).toMatchObject({ total: 150, completed: 150, failed: 0 });
  }

  test("inference - batches: a streamed chat holds the batch at the floor until the stream ends, however long it lasts", async () => {
    // Streamed chunks wait for release(); the batch's lines (not streamed) answer after DELAY_MS.
    p.ollama.set({ delayMs: DELAY_MS, gated: true });
    const stream = await p.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "chat streamed" }], stream: true });
    const chunks = stream[Symbol.asyncIterator]();
    await chunks.next(); // the stream is open: its request is over, its answer is not
    const openedAt = Date.now();
    const from = arrivals.length;
    const b = await submit(ids(300, "line-c").map(chatLine));
    try {
      // Three idle windows with the stream open: the batch runs, one line at a time.
      await waitFor(() => Date.now() - openedAt >= IDLE_MS * 3 && arrivals.slice(from).some((a) => a.kind === "batch"), {
        timeoutMs: 20_000,
        message: "batch lines beside the open stream",
      });
      expect(batchPeakSince(from)).toBeLessThanOrEqual(FLOOR);
    } finally {
      p.ollama.release(100);
      while (!(await chunks.next()).done);
    }
    const after = arrivals.length;
    await waitFor(() => batchPeakSince(after) >= PER_ACCOUNT, { timeoutMs: 20_000, message: "the batch back at full concurrency" });
    await p.client.batches.cancel(b.id);
    await ended(b.id);
  });

  test("inference - batches: a batch completes while interactive chats go on without a pause, at the floor", async () => {
    p.ollama.set({ delayMs: DELAY_MS / 2 });
    const before = arrivals.length;
    const chats = chatting(p.client);
    try {
      await waitFor(() => arrivals.some((a, i) => i >= before && a.kind === "interactive"), { message: "a chat" });
      const from = arrivals.length;
      const b = await submit(ids(40, "line-b").map(chatLine));
      const done = await ended(b.id);
      expect(chats.running).toBe(true);
      expect(done).toMatchObject({ status: "completed", request_counts: { total: 40, completed: 40, failed: 0 } });
      // Chats never stopped, so no line ran beside another.
      expect(batchPeakSince(from)).toBeLessThanOrEqual(FLOOR);
    } finally {
      await chats.stop();
    }
  });
});
