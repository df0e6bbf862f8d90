/**
 * Usage accounting: every inference becomes a row of inference.inferences. Rows are buffered and
 * written in batches off the response path, so recording adds no latency to an answer.
 */
import type { Pool } from "pg";
import { isDataError } from "../../lib/errors";
import type { InferenceRecord } from "./attempt-log";
import { inferenceUsageKey, UsageRecord } from "../../lib/usage-protocol";

/** The ledger's record of an inference: its tokens, under its model, at the time it finished; a batch line's at `creditFactor` of the price. */
export function inferenceUsage(record: InferenceRecord, at = new Date(), creditFactor?: number): UsageRecord {
  const end = at.toISOString();
  return {
    ...(creditFactor !== undefined && creditFactor !== 1 ? { creditFactor } : {}),
    key: inferenceUsageKey(record.id),
    clientId: record.clientId,
    resource: "inference",
    name: record.model,
    start: end,
    end,
    quantity: record.tokensUsed,
  };
}

export class InferencesRepository {
  constructor(private readonly db: Pool) {}

  async insertMany(records: InferenceRecord[]): Promise<void> {
    if (!records.length) return;
    const column = <K extends keyof InferenceRecord>(key: K) => records.map((r) => r[key]);
    await this.db.query(
      `INSERT INTO inference.inferences
         (id, client_id, model, provider, prompt_tokens, completion_tokens, tokens_used, duration_ms, outcome, error_code, stream)
       SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int[], $6::int[], $7::int[], $8::int[], $9::text[], $10::text[], $11::bool[])
       ON CONFLICT (id) DO NOTHING`,
      [
        column("id"),
        column("clientId"),
        column("model"),
        column("provider"),
        column("promptTokens"),
        column("completionTokens"),
        column("tokensUsed"),
        column("durationMs"),
        column("outcome"),
        column("errorCode"),
        column("stream"),
      ],
    );
  }
}

/** Collects records and writes them in batches: at `maxBatch` rows or `flushMs` after the first. */
export class UsageRecorder {
  private buffer: InferenceRecord[] = [];
  private timer?: NodeJS.Timeout;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly repository: Pick<InferencesRepository, "insertMany">,
    private readonly onError: (err: unknown, lost: number) => void,
    private readonly opts = { maxBatch: 200, flushMs: 50 },
  ) {}

  add(record: InferenceRecord): void {
    this.buffer.push(record);
    if (this.buffer.length >= this.opts.maxBatch) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.opts.flushMs);
  }

  /** Writes what is buffered; resolves when every write started so far has finished. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.buffer;
    this.buffer = [];
    if (batch.length) {
      // One write at a time keeps the order and the pool small under load.
      this.writing = this.writing.then(() => this.write(batch));
    }
    return this.writing;
  }

  /** A batch PostgreSQL refuses is written record by record: one bad record loses only itself. */
  private async write(batch: InferenceRecord[]): Promise<void> {
    try {
      await this.repository.insertMany(batch);
    } catch (err) {
      // Only a record PostgreSQL refuses is worth isolating; an outage loses the batch either way.
      if (batch.length === 1 || !isDataError(err)) return this.onError(err, batch.length);
      // ON CONFLICT DO NOTHING makes a record the failed batch did write harmless to write again.
      for (const record of batch) await this.repository.insertMany([record]).catch((e) => this.onError(e, 1));
    }
  }
}
