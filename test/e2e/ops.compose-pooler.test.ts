/**
 * The compose stack's pooler on its own (docs/operations.md "Deploy with Docker Compose", docs/databases.md
 * "Pooled connections"): docker-compose.yml's tenant-postgres and tenant-pgbouncer, set up as an operator
 * does (test/support/compose-stack.ts, with the test-only host-network override), and nothing else of the
 * stack: tenant-postgres's first start makes the pooler's auth_query role from .env's
 * TENANT_POOLER_PASSWORD (docker/pgbouncer/pooler-role.sh); the pooler container (entrypoint.sh and
 * ini.sh of docker/pgbouncer, the production image's files) lets a tenant role in with psql, held on
 * the server as that role; a wrong password, the admin and the pooler's own role get nothing; the
 * password file stays in the container's tmpfs, 0600. A database is set up as dbaas provisions one
 * (its role, and the guard schema with the pooler's lookup: services/dbaas/guard-sql.ts). The whole
 * stack through the gateway's pooledConnectionString: test/e2e/ops.stack.test.ts.
 *
 * Run by Compose v2 (`docker compose`, the CLI plugin from .ci/setup.d/41-docker-compose.sh), which
 * must also resolve the operator's .env and the override as Compose 1 does; the whole stack runs on
 * Debian 12's docker-compose 1.29 (test/e2e/ops.stack.test.ts), so both start the compose file.
 */
import { randomBytes } from "crypto";
import { guardSql } from "../../services/dbaas/guard-sql";
import { ContainerState, containers, createStack, destroyStack, run, Stack } from "../support/compose-stack";
import { waitFor } from "../support/platform";

const psql = (url: string, ...commands: string[]) =>
  run("psql", ["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", url, ...commands.flatMap((c) => ["-c", c])]).trim();
const REFUSED = /SASL authentication failed|password authentication failed/;

describe("ops - the compose stack's pooler (tenant-postgres and tenant-pgbouncer)", () => {
  let stack: Stack | undefined;
  const suffix = randomBytes(6).toString("hex");
  const tenant = { role: `user_${suffix}`, password: randomBytes(12).toString("hex"), database: `client_pooler_${suffix}` };
  let upSeconds = 0;
  let afterUp: ContainerState[] = [];

  beforeAll(async () => {
    // No platform container is started: the image is never used.
    stack = await createStack("ci-platform-test/app:not-started", { cli: "v2" });
    const started = Date.now();
    stack.compose(["up", "-d", "tenant-pgbouncer"]);
    // `up -d` returns once it started the pooler, which it may do only after tenant-postgres is healthy.
    afterUp = containers(stack);
    await waitFor(
      () => {
        const all = containers(stack!);
        return all.length === 2 && all.every((c) => c.health === "healthy") && all;
      },
      { timeoutMs: 180_000, intervalMs: 500, message: "tenant-postgres and tenant-pgbouncer healthy (docker compose)" },
    );
    upSeconds = (Date.now() - started) / 1000;
  }, 300_000);

  afterAll(() => {
    console.log(`compose pooler (docker compose): up → both healthy in ${upSeconds.toFixed(1)} s`);
    destroyStack(stack, []);
  }, 120_000);

  const admin = (db = "postgres") => `postgresql://tenant_admin:${stack!.env.TENANT_PG_PASSWORD}@127.0.0.1:${stack!.ports.TENANT_PG_PORT}/${db}`;
  const pooled = (user: string, password: string, db = tenant.database) =>
    `postgresql://${user}:${password}@127.0.0.1:${stack!.ports.TENANT_POOLER_PORT}/${db}`;

  it("ops pooler - Compose v2 made both containers, and waited for the tenant server's health check before starting the pooler", () => {
    const all = containers(stack!);
    expect(all.map((c) => [c.service, c.compose.split(".")[0]]).sort()).toEqual([
      ["tenant-pgbouncer", "2"],
      ["tenant-postgres", "2"],
    ]);
    // depends_on service_healthy: tenant-postgres was healthy when `up` returned (initdb alone takes seconds).
    expect(afterUp.map((c) => [c.service, c.service === "tenant-postgres" ? c.health : "started"]).sort()).toEqual([
      ["tenant-pgbouncer", "started"],
      ["tenant-postgres", "healthy"],
    ]);
    const startedAt = (c: ContainerState) => Date.parse(run("docker", ["inspect", "-f", "{{.State.StartedAt}}", c.id]).trim());
    const [pooler, tenant] = ["tenant-pgbouncer", "tenant-postgres"].map((service) => all.find((c) => c.service === service)!);
    expect(startedAt(pooler)).toBeGreaterThan(startedAt(tenant));
    // The host network only, as with Compose 1: v2 made no network of its own (none may leave loopback).
    expect(all.map((c) => run("docker", ["inspect", "-f", "{{.HostConfig.NetworkMode}}", c.id]).trim())).toEqual(["host", "host"]);
    expect(run("docker", ["network", "ls", "-q", "--filter", `label=com.docker.compose.project=${stack!.project}`]).trim()).toBe("");
  });

  it("ops pooler - the tenant server's first start made the auth_query role, LOGIN and nothing else, with .env's password", () => {
    expect(
      containers(stack!)
        .map((c) => c.service)
        .sort(),
    ).toEqual(["tenant-pgbouncer", "tenant-postgres"]);
    expect(
      psql(
        admin(),
        "SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolinherit, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = 'dbaas_pooler'",
      ),
    ).toBe("t|f|f|f|f|f|f");
    const direct = `postgresql://dbaas_pooler:${stack!.env.TENANT_POOLER_PASSWORD}@127.0.0.1:${stack!.ports.TENANT_PG_PORT}/postgres`;
    expect(psql(direct, "SELECT current_user")).toBe("dbaas_pooler");
    expect(() => psql(direct.replace(stack!.env.TENANT_POOLER_PASSWORD, "wrong"), "SELECT 1")).toThrow(REFUSED);
  });

  it("ops pooler - a tenant's own role and password reach its database through PgBouncer, held on the server as that role", () => {
    psql(
      admin(),
      `CREATE ROLE ${tenant.role} LOGIN PASSWORD '${tenant.password}' CONNECTION LIMIT 4`,
      `CREATE DATABASE ${tenant.database} OWNER ${tenant.role}`,
    );
    psql(admin(tenant.database), guardSql({ extensions: [], poolerRole: "dbaas_pooler" }));
    const url = pooled(tenant.role, tenant.password);
    psql(url, "CREATE TABLE t (v text)", "INSERT INTO t VALUES ('through the pooler')");
    // Answered by the tenant server (its port), in the tenant's role, through the pooler's port.
    expect(psql(url, "SELECT v || ' ' || current_user || ' ' || inet_server_port() FROM t")).toBe(
      `through the pooler ${tenant.role} ${stack!.ports.TENANT_PG_PORT}`,
    );
    expect(psql(admin(), `SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = '${tenant.role}' AND datname = '${tenant.database}'`)).toBe("t");
  });

  it("ops pooler - a wrong password, the admin, and the pooler's own password in a tenant's name get nothing; the pooler's role reads no table", () => {
    expect(() => psql(pooled(tenant.role, "wrong-password"), "SELECT 1")).toThrow(REFUSED);
    // The lookup answers tenant roles only: to PgBouncer the admin does not exist, even with its password.
    expect(() => psql(pooled("tenant_admin", stack!.env.TENANT_PG_PASSWORD), "SELECT 1")).toThrow(/no such user/);
    expect(() => psql(pooled(tenant.role, stack!.env.TENANT_POOLER_PASSWORD), "SELECT 1")).toThrow(REFUSED);
    // The pooler's role may call the lookup, nothing else: no table of the tenant's.
    expect(() => psql(pooled("dbaas_pooler", stack!.env.TENANT_POOLER_PASSWORD), "SELECT count(*) FROM t")).toThrow(/permission denied/);
  });

  it("ops pooler - the password file is the container's, in its tmpfs, mode 0600, owned by the user PgBouncer runs as", () => {
    const pooler = containers(stack!).find((c) => c.service === "tenant-pgbouncer")!;
    expect(run("docker", ["exec", pooler.id, "stat", "-c", "%a %U", "/tmp/pgbouncer/userlist.txt", "/tmp/pgbouncer/pgbouncer.ini"]).trim().split("\n")).toEqual(
      ["600 postgres", "600 postgres"],
    );
    // PgBouncer's own environment no longer holds it (entrypoint.sh unsets it before exec).
    expect(run("docker", ["exec", pooler.id, "sh", "-c", "tr '\\0' '\\n' </proc/1/environ | grep -c TENANT_POOLER_PASSWORD || true"]).trim()).toBe("0");
  });
});
