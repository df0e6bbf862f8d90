/**
 * This process's liveness, visible to every replica: a session advisory lock on the platform
 * database, keyed by a fresh owner id and held on one connection for the service's lifetime.
 * Records a process works on carry its owner id (migrations.ts v2, owner_alive); when the process
 * dies its connection closes and PostgreSQL frees the lock at once, so its unfinished records stop
 * counting towards the account's limit and the reconciler removes them without waiting.
 */
import { randomUUID } from "crypto";
import type { LoggerInstance } from "moleculer";
import { Client } from "pg";

const LOCK_SQL = "SELECT pg_advisory_lock(hashtext('ci-platform:dbaas:owner'), hashtext($1))";
const RECONNECT_MS = 1000;

export class OwnerLease {
  readonly id = randomUUID();
  private client?: Client;
  private stopped = false;
  private retry?: NodeJS.Timeout;

  constructor(
    private readonly databaseUrl: string,
    private readonly logger: LoggerInstance,
  ) {}

  /** Takes the lock; rejects if the platform database cannot be reached now. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.hold();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    await this.client?.end().catch(() => undefined);
    this.client = undefined;
  }

  private async hold(): Promise<void> {
    const client = new Client({ connectionString: this.databaseUrl, connectionTimeoutMillis: 10_000 });
    // Losing the connection frees the lock: take it again, or this process's work looks abandoned.
    client.on("error", () => this.reconnect(client));
    client.on("end", () => this.reconnect(client));
    await client.connect();
    await client.query(LOCK_SQL, [this.id]);
    this.client = client;
  }

  private reconnect(lost: Client): void {
    if (this.stopped || this.client !== lost) return;
    this.client = undefined;
    this.logger.warn("dbaas owner lease lost with its connection; taking it again");
    const attempt = () => {
      if (this.stopped) return;
      this.hold().catch(() => {
        this.retry = setTimeout(attempt, RECONNECT_MS);
        this.retry.unref();
      });
    };
    attempt();
  }
}
