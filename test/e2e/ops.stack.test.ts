/**
 * The image and the compose stack, run (issue 17; docs/operations.md, "the compose stack, tested"):
 * the Dockerfile built on the registry-free base (scripts/image/build.sh), small and without dev
 * dependencies or tests; docker-compose.yml with the test-only host-network override: every service
 * in its own container of that image as uid 1000, healthy, serving a client (register, a job on a
 * simulated card, a database reached with psql, directly and through the pooler); down and up keeps it all; a rebuilt image started
 * on the same volumes keeps it all and its migrations are applied. Prints the figures it measured.
 */
import { randomBytes } from "crypto";
import { connect } from "nats";
import { SERVICE_REGISTRY } from "../../moleculer.config";
import { migrations as adminMigrations } from "../../services/admin/migrations";
import { migrations as authMigrations } from "../../services/auth/migrations";
import { migrations as dbaasMigrations } from "../../services/dbaas/migrations";
import { migrations as schedulerMigrations } from "../../services/gpu-scheduler/migrations";
import { migrations as inferenceMigrations } from "../../services/inference/migrations";
import { migrations as usageMigrations } from "../../services/usage/migrations";
import { buildImage, buildServersImage, containers, createStack, destroyStack, run, Stack, upAndHealthy } from "../support/compose-stack";
import { http, waitFor } from "../support/platform";

const JOB_IMAGE = process.env.TEST_JOB_IMAGE || "ci-platform/test-busybox:latest";
const tag = `ci-platform-test/app:${randomBytes(4).toString("hex")}`;
const [imageA, imageB] = [`${tag}-a`, `${tag}-b`];
const PLATFORM = Object.keys(SERVICE_REGISTRY).sort();
const SERVERS = ["nats", "postgres", "redis", "tenant-pgbouncer", "tenant-postgres"];
const figures: Record<string, string> = {};
const MIGRATIONS: Record<string, number[]> = {
  admin: adminMigrations.map((m) => m.version),
  auth: authMigrations.map((m) => m.version),
  dbaas: dbaasMigrations.map((m) => m.version),
  gpu_scheduler: schedulerMigrations.map((m) => m.version),
  inference: inferenceMigrations.map((m) => m.version),
  usage: usageMigrations.map((m) => m.version),
};

describe("ops - the image and the compose stack, run", () => {
  let stack: Stack | undefined;
  const client = { email: `stack-${randomBytes(4).toString("hex")}@example.com`, password: "a long password", token: "" };
  let jobId = "";
  let database = { id: "", connectionString: "", pooledConnectionString: "" };

  const psql = (url: string, sql: string) => run("psql", ["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", url, "-c", sql]).trim();
  const image = (ref: string, cmd: string[]) => run("docker", ["run", "--rm", "--network", "none", "--entrypoint", cmd[0], ref, ...cmd.slice(1)]);

  /** What must hold after every start: the account, its finished job and its database with the row it wrote. */
  const expectStateKept = async () => {
    const base = stack!.gateway;
    const login = await http(base, "POST", "/api/auth/login", { body: { email: client.email, password: client.password } });
    expect(login.status).toBe(200);
    const job = await http(base, "GET", `/api/gpu/jobs/${jobId}`, { token: login.body.accessToken });
    expect([job.status, job.body.status, job.body.result?.exitCode]).toEqual([200, "completed", 0]);
    const list = await http(base, "GET", "/api/databases", { token: login.body.accessToken });
    expect(list.body.databases.map((d: { id: string }) => d.id)).toEqual([database.id]);
    expect(psql(database.connectionString, "SELECT v FROM kept")).toBe("written before the restart");
    expect(psql(database.pooledConnectionString, "SELECT v FROM kept")).toBe("written before the restart");
  };

  afterAll(() => {
    console.log(
      `ops stack figures:\n${Object.entries(figures)
        .map(([k, v]) => `  ${k}: ${v}`)
        .join("\n")}`,
    );
    destroyStack(stack, [imageA, imageB]);
    // The job's container and /out volume, should the node not have removed them.
    if (!jobId) return;
    const left = run("docker", ["ps", "-aq", "--filter", `label=ci-platform.job-id=${jobId}`])
      .split("\n")
      .filter(Boolean);
    if (left.length) run("docker", ["rm", "-f", ...left]);
    run("docker", ["volume", "rm", "-f", `ci-platform-out-${jobId}`]);
  }, 120_000);

  it("ops - the image builds from the registry-free base, runs as uid 1000, and holds no dev dependency nor test", () => {
    figures["platform image build (base cached or made, layers as Docker has them)"] = `${buildImage(imageA).toFixed(1)} s`;
    figures["servers image build"] = `${buildServersImage().toFixed(1)} s`;
    const [size, user, cmd] = run("docker", ["image", "inspect", "-f", "{{.Size}}|{{.Config.User}}|{{json .Config.Cmd}}", imageA]).trim().split("|");
    figures["platform image size"] = `${(Number(size) / 1e6).toFixed(0)} MB`;
    expect([user, JSON.parse(cmd)]).toEqual(["node", ["node", "dist/index.js"]]);
    expect(image(imageA, ["id", "-u"]).trim()).toBe("1000");
    expect(image(imageA, ["node", "--version"])).toMatch(/^v20\./);
    // Production dependencies only: none of the dev tools, no sources, no tests.
    const listed = image(imageA, ["sh", "-c", "ls /app; ls /app/node_modules; ls /app/node_modules/.bin 2>/dev/null || true"]).split("\n");
    expect(listed).toEqual(expect.arrayContaining(["dist", "node_modules", "package.json", "moleculer", "pg", "nats"]));
    for (const absent of ["test", "bench", "lib", "services", "jest", "typescript", "eslint", "ts-jest", "prettier", ".env", "docker-compose.yml"])
      expect([absent, listed.includes(absent)]).toEqual([absent, false]);
    expect(image(imageA, ["sh", "-c", "find /app -name '*.test.*' -o -name '*.ts' ! -name '*.d.ts' | grep -v node_modules | head -3"]).trim()).toBe("");
    // Every service's module loads from the compiled tree.
    const loaded = image(imageA, [
      "node",
      "-e",
      "const c=require('./dist/moleculer.config');console.log(c.resolveServices([]).map(s=>s.name).sort().join(','))",
    ]);
    expect(loaded.trim().split(",")).toEqual(PLATFORM);
  }, 1_200_000);

  it("ops - compose starts every service in its own container of the image, healthy, on loopback only", async () => {
    stack = await createStack(imageA);
    figures["up → every health check green (first start, empty volumes)"] = `${(await upAndHealthy(stack, PLATFORM.length + SERVERS.length)).toFixed(1)} s`;
    const all = containers(stack);
    expect(all.map((c) => c.service).sort()).toEqual([...PLATFORM, ...SERVERS].sort());
    const imageId = run("docker", ["image", "inspect", "-f", "{{.Id}}", imageA]).trim();
    for (const c of all.filter((x) => PLATFORM.includes(x.service))) {
      expect([c.service, c.image, c.user]).toEqual([c.service, imageId, "node"]);
      // The process itself (PID 1 of the container) runs as uid 1000, and so does anything else in it
      // (a health check's process may be running beside it, listed first or not).
      const processes = run("docker", ["top", c.id, "-eo", "pid,uid,args"]).split("\n").slice(1).filter(Boolean);
      expect([c.service, processes.some((p) => /^\s*\d+\s+1000\s+node dist\/index\.js/.test(p))]).toEqual([c.service, true]);
      expect([c.service, processes.filter((p) => !/^\s*\d+\s+1000\s/.test(p))]).toEqual([c.service, []]);
    }
    // Every listener of the stack is bound to 127.0.0.1, nothing to other addresses of the machine.
    const listening = run("ss", ["-ltnH"]);
    for (const [what, port] of Object.entries(stack.ports)) {
      const local = [...listening.matchAll(new RegExp(`\\s(\\S+):${port}\\s`, "g"))].map((m) => m[1]);
      expect([what, local.length > 0, local.every((a) => a === "127.0.0.1")]).toEqual([what, true, true]);
    }
  }, 600_000);

  it("ops - the bus of the stack refuses a client without a user and a password", async () => {
    const server = `tls://127.0.0.1:${stack!.ports.TEST_NATS_PORT}`;
    const tls = { caFile: `${stack!.dir}/docker/nats-tls/ca.pem` };
    await expect(connect({ servers: server, tls, reconnect: false, timeout: 5_000 })).rejects.toThrow(/Authorization/i);
    await expect(connect({ servers: server, tls, user: "api-gateway", pass: "wrong", reconnect: false, timeout: 5_000 })).rejects.toThrow(/Authorization/i);
    const gateway = await connect({ servers: server, tls, user: "api-gateway", pass: stack!.env.NATS_PASSWORD_API_GATEWAY, reconnect: false, timeout: 5_000 });
    await gateway.close();
  });

  it("ops - through the gateway a client registers, runs a job on the simulated card and uses its database", async () => {
    const base = stack!.gateway;
    const reg = await http(base, "POST", "/api/auth/register", { body: { email: client.email, name: "Stack", password: client.password } });
    expect(reg.status).toBe(201);
    client.token = reg.body.accessToken;
    const bad = await http(base, "POST", "/api/gpu/jobs", { token: client.token, body: { command: "" } });
    expect([bad.status, bad.body.error.code]).toEqual([400, "VALIDATION_FAILED"]);

    const marker = `stack-${randomBytes(4).toString("hex")}`;
    const created = await http(base, "POST", "/api/gpu/jobs", { token: client.token, body: { command: `echo ${marker}`, containerImage: JOB_IMAGE } });
    expect(created.status).toBe(201);
    jobId = created.body.id;
    const done = await waitFor(
      async () => {
        const job = await http(base, "GET", `/api/gpu/jobs/${jobId}`, { token: client.token });
        return ["completed", "failed", "cancelled"].includes(job.body.status) && job.body;
      },
      { timeoutMs: 60_000, intervalMs: 250, message: "the job finished" },
    );
    expect([done.status, done.gpuType, done.result.exitCode, done.result.output.trim()]).toEqual(["completed", "NVIDIA GeForce RTX 3060", 0, marker]);

    const db = await http(base, "POST", "/api/databases", { token: client.token });
    expect(db.status).toBe(201);
    expect([db.body.host, db.body.port]).toEqual(["127.0.0.1", stack!.ports.TENANT_PG_PORT]);
    database = { id: db.body.id, connectionString: db.body.connectionString, pooledConnectionString: db.body.pooledConnectionString };
    psql(database.connectionString, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('written before the restart')");
    expect(psql(database.connectionString, "SELECT count(*) FROM kept")).toBe("1");
    // The pooled string: the same role and password through the stack's PgBouncer (auth_query as the
    // pooler role tenant-postgres's first start made), which holds the session on the server.
    expect(database.pooledConnectionString).toBe(database.connectionString.replace(`:${stack!.ports.TENANT_PG_PORT}/`, `:${stack!.ports.TENANT_POOLER_PORT}/`));
    const detail = await http(base, "GET", `/api/databases/${database.id}`, { token: client.token });
    expect([detail.body.pooledHost, detail.body.pooledPort]).toEqual(["127.0.0.1", stack!.ports.TENANT_POOLER_PORT]);
    const pooled = psql(database.pooledConnectionString, "SELECT count(*) || ' ' || inet_server_port() FROM kept");
    expect(pooled).toBe(`1 ${stack!.ports.TENANT_PG_PORT}`);
    const wrong = database.pooledConnectionString.replace(/:([^:@/]+)@/, ":wrong-password@");
    expect(() => psql(wrong, "SELECT 1")).toThrow(/password authentication failed|SASL authentication failed/);
  }, 120_000);

  it("ops - docker-compose down and up again keeps accounts, jobs and databases", async () => {
    stack!.compose(["down", "-t", "30"]);
    expect(containers(stack!)).toEqual([]);
    figures["up → every health check green (restart on existing volumes)"] = `${(await upAndHealthy(stack!, PLATFORM.length + SERVERS.length)).toFixed(1)} s`;
    await expectStateKept();
  }, 600_000);

  it("ops - a rebuilt image started on the previous image's volumes applies its migrations and loses nothing", async () => {
    // A trivial change: a new label makes a new image (its own ID) from the same sources.
    figures["platform image rebuild (warm: base and layers cached)"] =
      `${buildImage(imageB, ["--label", `ci-platform.test.rebuild=${Date.now()}`]).toFixed(1)} s`;
    const [idA, idB] = [imageA, imageB].map((ref) => run("docker", ["image", "inspect", "-f", "{{.Id}}", ref]).trim());
    expect(idB).not.toBe(idA);
    stack!.compose(["down", "-t", "30"]);
    stack!.setEnv("CI_PLATFORM_IMAGE", imageB);
    figures["up → every health check green (new image, previous volumes)"] = `${(await upAndHealthy(stack!, PLATFORM.length + SERVERS.length)).toFixed(1)} s`;
    for (const c of containers(stack!).filter((x) => PLATFORM.includes(x.service))) expect([c.service, c.image]).toEqual([c.service, idB]);
    await expectStateKept();
    // Each service's schema has exactly the migrations the new image ships, applied on the old volume.
    const stateUrl = `postgresql://ci:${stack!.env.POSTGRES_PASSWORD}@127.0.0.1:${stack!.ports.TEST_PG_PORT}/ci_platform`;
    for (const [schema, versions] of Object.entries(MIGRATIONS))
      expect([schema, psql(stateUrl, `SELECT string_agg(version::text, ',' ORDER BY version) FROM ${schema}.schema_migrations`)]).toEqual([
        schema,
        versions.join(","),
      ]);
  }, 1_200_000);
});
