/**
 * dbaas on a tenant server that requires TLS (.ci/setup.d/32-tenant-postgres-tls.sh: 127.0.0.1:5434,
 * self-signed certificate, plain-text connections rejected): connection strings say
 * sslmode=require, and work with psql and with pg (trusting the certificate); the same string
 * without TLS is refused; snapshots and branches run over TLS too; DBAAS_SSLMODE overrides.
 */
import { existsSync } from "fs";
import type { TestPlatform } from "../support/platform";
import { callerMeta, connectRefusal, dbaasApp, psql, withClient } from "./dbaas.helpers";
import { startTestPlatform } from "../support/platform";

const CA = process.env.TEST_TENANT_TLS_CA || "/etc/ci-platform/tenant-tls-ca.pem";
const TLS_ADMIN_URL =
  process.env.TEST_TENANT_TLS_ADMIN_URL || `postgresql://ci_admin:ci-tenant-admin@127.0.0.1:5434/postgres?sslmode=verify-full&sslrootcert=${CA}`;

type Created = { id: string; connectionString: string };

async function startOnTls(env: Record<string, string> = {}): Promise<TestPlatform> {
  if (!existsSync(CA)) throw new Error(`${CA} is missing: run .ci/setup.d/32-tenant-postgres-tls.sh`);
  const url = new URL(TLS_ADMIN_URL);
  return startTestPlatform({
    services: ["dbaas"],
    env: {
      DBAAS_ADMIN_URL: TLS_ADMIN_URL,
      DBAAS_PUBLIC_HOST: url.hostname,
      DBAAS_PUBLIC_PORT: url.port,
      DBAAS_RECONCILE_S: "3600",
      DBAAS_QUOTA_CHECK_S: "3600",
      ...env,
    },
  });
}

describe("dbaas tls", () => {
  let platform: TestPlatform;
  const meta = callerMeta();
  const made: string[] = [];
  const create = async (params: object = {}) => {
    const db = await platform.broker.call<Created, object>("dbaas.create", params, { meta });
    made.push(db.id);
    return db;
  };

  beforeAll(async () => {
    platform = await startOnTls();
  });
  afterAll(async () => {
    for (const id of made) await platform.broker.call("dbaas.destroy", { id }, { meta }).catch(() => undefined);
    await platform.stop();
  });

  it("dbaas tls - the connection string says sslmode=require and works with psql and pg; without TLS it is refused", async () => {
    const db = await create();
    expect(db.connectionString).toMatch(
      /^postgresql:\/\/user_[0-9a-f]{12}:[A-Za-z0-9]{32}@127\.0\.0\.1:5434\/client_[a-z0-9]{8}_[0-9a-f]{8}\?sslmode=require$/,
    );

    const run = psql(db.connectionString, "CREATE TABLE t (n int)", "INSERT INTO t VALUES (1)", "SELECT count(*) FROM t");
    expect([run.status, run.stdout.trim().split("\n").pop()]).toEqual([0, "1"]);
    // pg treats sslmode=require as verify-full: the client trusts the server's certificate.
    const trusted = `${db.connectionString}&sslrootcert=${CA}`;
    expect(await withClient(trusted, async (c) => (await c.query("SELECT count(*)::int AS n FROM t")).rows[0].n)).toBe(1);

    const plain = db.connectionString.replace("sslmode=require", "sslmode=disable");
    expect(await connectRefusal(plain)).toBe("28000");
    expect(psql(plain, "SELECT 1").stderr).toMatch(/no encryption/);
  });

  it("dbaas tls - snapshots, branches and rotation work over TLS", async () => {
    const db = await create();
    await withClient(`${db.connectionString}&sslrootcert=${CA}`, (c) => c.query("CREATE TABLE kept AS SELECT 7 AS n"));
    const snap = await platform.broker.call<{ id: string }, object>("dbaas.createSnapshot", { id: db.id }, { meta });
    await dbaasApp(platform).snapshotter.settled();
    const branch = await create({ fromSnapshot: snap.id });
    expect(psql(branch.connectionString, "SELECT n FROM kept").stdout.trim()).toBe("7");
    const rotated = await platform.broker.call<Created, object>("dbaas.rotatePassword", { id: branch.id }, { meta });
    expect(rotated.connectionString).toMatch(/\?sslmode=require$/);
    expect(psql(rotated.connectionString, "SELECT n FROM kept").stdout.trim()).toBe("7");
    await platform.broker.call("dbaas.deleteSnapshot", { id: snap.id }, { meta });
  });

  it("dbaas tls - DBAAS_SSLMODE=verify-full is written as is", async () => {
    const strict = await startOnTls({ DBAAS_SSLMODE: "verify-full" });
    const own = callerMeta();
    try {
      const db = await strict.broker.call<Created, object>("dbaas.create", {}, { meta: own });
      try {
        expect(db.connectionString).toMatch(/\?sslmode=verify-full$/);
        expect(await withClient(`${db.connectionString}&sslrootcert=${CA}`, async (c) => (await c.query("SELECT 1 AS one")).rows[0].one)).toBe(1);
      } finally {
        await strict.broker.call("dbaas.destroy", { id: db.id }, { meta: own });
      }
    } finally {
      await strict.stop();
    }
  });
});
