/**
 * Index builds grow a database without moving the row counters the quota tick watches (CREATE
 * INDEX writes whole files and a few catalog rows): the tick must still measure and freeze it,
 * long before the full round. Against the real tenant cluster.
 */
import { Client } from "pg";
import type { TestPlatform } from "../support/platform";
import { waitFor } from "../support/platform";
import type { DatabaseCreated, DatabaseDetail } from "../../services/dbaas/dbaas.service";
import { NEAR_RATIO } from "../../services/dbaas/quota";
import { callerMeta, databaseBytes, refusal, startDbaasPlatform, stopDbaasPlatform, withClient } from "../integration/dbaas.helpers";

const MIB = 1048576;
const QUOTA_MB = 20;
/**
 * Indexes one session builds at most: each about 1 MiB, built in well under a tick, so no write
 * transaction is ever open long enough to count as `writing`. Bounds the test's disk and time.
 */
const MAX_INDEXES = 40;
/**
 * How far past the quota the database may end: what a tick (1 s), the statistics' flush lag (1 s)
 * and the freeze (under 1 s) let one session build, at the index build rate this test measures.
 */
const overshootAllowed = (mbPerS: number) => Math.max(4, mbPerS * 3);

describe("databases - index builds cannot grow a database past its quota unseen", () => {
  let platform: TestPlatform;
  const meta = callerMeta();

  beforeAll(async () => {
    // The full round never comes within the test: only the tick can catch the builds.
    platform = await startDbaasPlatform({ env: { DBAAS_MAX_STORAGE_MB: String(QUOTA_MB), DBAAS_QUOTA_CHECK_S: "3600", DBAAS_QUOTA_NEAR_CHECK_S: "1" } });
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas - CREATE INDEX after CREATE INDEX on a table below 80 % of the quota: frozen within seconds, ending within the stated slack", async () => {
    const db = await platform.broker.call<DatabaseCreated, object>("dbaas.create", {}, { meta });
    const detail = () => platform.broker.call<DatabaseDetail, object>("dbaas.get", { id: db.id }, { meta });
    // About 6.5 MiB of 20,000 rows (uncompressed: under the TOAST threshold): below NEAR_RATIO of the quota, so not watched as near.
    await withClient(db.connectionString, (c) =>
      c.query("CREATE TABLE t (k text NOT NULL, pad text NOT NULL); INSERT INTO t SELECT md5(i::text), repeat('x', 280) FROM generate_series(1, 20000) i"),
    );
    const filled = await databaseBytes(db.databaseName);
    expect(filled).toBeLessThan(NEAR_RATIO * QUOTA_MB * MIB);
    // The fill itself is busy: wait for the tick to record it below the quota, so the builds start from a measured state.
    await waitFor(async () => (await detail()).storageMb * MIB >= filled - MIB, { timeoutMs: 15_000, message: "the fill to be measured" });
    expect((await detail()).readOnly).toBe(false);

    const attacker = new Client({ connectionString: db.connectionString });
    // Ended between two statements, the session's error arrives here, and the next query is refused
    // with pg's "not queryable" instead: the code that ended it is this one.
    let endedBy: { code?: string; message: string } | undefined;
    attacker.on("error", (err: Error & { code?: string }) => (endedBy ??= err));
    await attacker.connect();
    const started = Date.now();
    let built = 0;
    let crossedAt: number | undefined;
    let stoppedBy = "";
    try {
      for (; built < MAX_INDEXES; built++) {
        await attacker.query(`CREATE INDEX t_k${built} ON t (md5(k || '${built}'))`);
        if (crossedAt === undefined && (await databaseBytes(db.databaseName)) > QUOTA_MB * MIB) crossedAt = Date.now();
      }
    } catch (err) {
      const cause = endedBy ?? (err as { code?: string; message: string });
      stoppedBy = String(cause.code ?? cause.message);
    } finally {
      await attacker.end().catch(() => undefined);
    }
    const buildMbPerS = ((await databaseBytes(db.databaseName)) - filled) / MIB / Math.max(0.001, (Date.now() - started) / 1000);
    expect(crossedAt).toBeDefined();
    // Frozen by the tick, not the full round: the builds were stopped (session ended, or refused) before MAX_INDEXES.
    expect(built).toBeLessThan(MAX_INDEXES);
    expect(stoppedBy).toMatch(/57P01|42501|Connection terminated|terminat/i);
    await waitFor(async () => (await detail()).readOnly, { timeoutMs: 5_000, message: "the database to be read-only" });
    expect(Date.now() - crossedAt!).toBeLessThan(10_000);
    const ended = await databaseBytes(db.databaseName);
    expect(ended).toBeGreaterThan(QUOTA_MB * MIB); // the committed indexes keep it over: it stays frozen
    expect(ended / MIB).toBeLessThanOrEqual(QUOTA_MB + overshootAllowed(buildMbPerS));
    // Frozen for real: no further index, and a fresh session is refused too.
    await withClient(db.connectionString, async (c) => expect(await refusal(c, "CREATE INDEX t_more ON t (md5(k || 'more'))")).toBe("42501"));
    console.log(
      `index growth: quota ${QUOTA_MB} MiB, ${built} indexes built at ${buildMbPerS.toFixed(1)} MiB/s, ended ${(ended / MIB).toFixed(1)} MiB (allowed ${(QUOTA_MB + overshootAllowed(buildMbPerS)).toFixed(1)})`,
    );
  }, 60_000);
});
