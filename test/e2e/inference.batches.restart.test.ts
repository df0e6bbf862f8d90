/**
 * A batch survives its inference process: the gateway here, inference in a child process over
 * real NATS; the child is stopped mid-batch (SIGTERM) and another started. Every line ends in the
 * output exactly once and the provider stand-in saw each custom_id exactly once: no finished line
 * lost, none run twice. The upload's body also crosses the bus as a stream here.
 */
import { toFile } from "openai";
import { newAccount, openAiClient } from "../support/inference-platform";
import { NatsPlatform, startNatsPlatform } from "../support/nats-platform";
import { OllamaStandin } from "../support/provider-standins";

describe("inference - batches across an inference restart", () => {
  let ollama: OllamaStandin;
  let platform: NatsPlatform;

  beforeAll(async () => {
    ollama = await new OllamaStandin().start();
    platform = await startNatsPlatform({
      env: { OLLAMA_URL: ollama.url, BATCH_POLL_MS: "50", BATCH_CONCURRENCY: "4" },
      processes: [["inference"]],
      local: ["api-gateway", "auth"],
      route: ["GET", "/api/models/health"],
    });
  });

  afterAll(async () => {
    await platform?.stop();
    await ollama?.stop();
  });

  test("inference - batches: stopping the inference process mid-batch and starting another loses and repeats no line", async () => {
    await platform.waitForRoute("POST", "/api/auth/register");
    const client = openAiClient(platform.baseUrl, (await newAccount(platform.baseUrl)).apiKey);
    ollama.set({ delayMs: 500 });
    const customIds = Array.from({ length: 24 }, (_, i) => `r-${i}`);
    const body = customIds
      .map((c) =>
        JSON.stringify({ custom_id: c, method: "POST", url: "/v1/chat/completions", body: { model: "llama3.2:1b", messages: [{ role: "user", content: c }] } }),
      )
      .join("\n");
    const file = await client.files.create({ file: await toFile(Buffer.from(body), "restart.jsonl"), purpose: "batch" });
    const batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await platform.waitFor(async () => (await client.batches.retrieve(batch.id)).request_counts!.completed >= 4, {
      timeoutMs: 20_000,
      message: "some lines to finish",
    });
    await platform.children[0].stop("SIGTERM");
    const halfway = await client.batches.retrieve(batch.id).catch(() => undefined);
    // The gateway may not know yet that inference is gone (503 then): either way not every line ran.
    expect(halfway?.status ?? "in_progress").toBe("in_progress");
    platform.spawn(["inference"]);
    const done = await platform.waitFor(
      async () => {
        const b = await client.batches.retrieve(batch.id).catch(() => undefined);
        return b?.status === "completed" ? b : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100, message: "the batch to complete in the new process" },
    );
    expect(done.request_counts).toEqual({ total: 24, completed: 24, failed: 0 });
    const output = (await (await client.files.content(done.output_file_id!)).text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(output.map((l) => l.custom_id).sort()).toEqual([...customIds].sort());
    const calls = new Map<string, number>();
    for (const r of ollama.requests) if (r.path === "/api/chat") calls.set(r.body.messages[0].content, (calls.get(r.body.messages[0].content) ?? 0) + 1);
    expect(customIds.filter((c) => calls.get(c) !== 1)).toEqual([]);
  });
});
