/**
 * Platform access through the node's relay (issue 28), with real bubblewrap sandboxes and Docker
 * containers, a real HTTP server as the platform and the real tenant PostgreSQL servers (5433
 * plain, 5434 TLS only): a job with a grant reaches exactly those two, nothing else; the relay
 * is gone when the job ends; a job without a grant is launched exactly as before.
 */
import Docker from "dockerode";
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from "fs";
import http from "http";
import net, { AddressInfo } from "net";
import os from "os";
import path from "path";
import { Client } from "pg";
import type { PlatformGrantParams } from "../../lib/job-spec";
import type { DockerExecutor } from "../../services/gpu-node/docker-executor";
import type { JobExecutor, JobLimits, JobOutcome } from "../../services/gpu-node/job";
import { jobProcess } from "../../services/gpu-node/job-process";
import { relayHost, RelayHost } from "../../services/gpu-node/platform-access";
import { PLATFORM_SOCKET } from "../../services/gpu-node/relay-forwarder";
import { relayTestExecutor, removeContainersOf, simulatedCard } from "../support/docker";
import { uniqueName, waitFor } from "../support/platform";
import { testSandbox } from "../support/sandbox";

const TENANT_ADMIN = process.env.TEST_TENANT_ADMIN_URL || "postgresql://ci_admin:ci-tenant-admin@127.0.0.1:5433/postgres";
/** An image with psql and wget (the test servers' own image, built locally). */
const PSQL_IMAGE = process.env.TEST_PSQL_IMAGE || "ci-platform-test/servers:bookworm";
const card = simulatedCard("GPU-sim-relay-0");
const docker = new Docker();
const namespace = uniqueName("relaytest");

/** The "platform": answers every request with what it saw; /hold/<n> answers once n requests are in flight. */
function startPlatform(): Promise<{ server: http.Server; port: number; inFlightMax: () => number }> {
  let inFlight = 0;
  let max = 0;
  const held: (() => void)[] = [];
  const server = http.createServer((req, res) => {
    inFlight++;
    max = Math.max(max, inFlight);
    const answer = () => (inFlight--, res.end(JSON.stringify({ path: req.url, auth: req.headers.authorization ?? null })));
    const hold = /^\/hold\/(\d+)$/.exec(req.url ?? "");
    if (!hold) return answer();
    held.push(answer);
    if (held.length >= Number(hold[1])) held.splice(0).forEach((f) => f());
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve({ server, port: (server.address() as AddressInfo).port, inFlightMax: () => max })),
  );
}

const commandOutput = (outcome: JobOutcome | null) => (outcome?.type === "finished" ? outcome.output : JSON.stringify(outcome));

describe.each(["sandboxed", "docker"] as const)("gpu-node relay (%s)", (mode) => {
  let platform: Awaited<ReturnType<typeof startPlatform>>;
  let admin: Client;
  let relayDir: string;
  let logDir: string;
  let relay: RelayHost;
  let limits: JobLimits;
  const role = uniqueName("relay_role");
  const password = "p@ss/word:1?";
  const grant = (): PlatformGrantParams => ({ token: `cit_${"a1".repeat(16)}`, databases: [{ database: "postgres", user: role, password }] });

  const executor = (host: RelayHost | undefined = relay): JobExecutor =>
    relayTestExecutor(mode, { limits: () => limits, relay: host, namespace, image: PSQL_IMAGE, nodeId: "node-relay", docker });

  /** `null`: a job without platform access. */
  const run = (command: string, platformGrant: PlatformGrantParams | null = grant(), host?: RelayHost, env?: Record<string, string>) =>
    executor(host).run({ jobId: uniqueName("job"), card, command, env, platform: platformGrant ?? undefined });

  beforeAll(async () => {
    platform = await startPlatform();
    admin = new Client({ connectionString: TENANT_ADMIN });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
    await admin.query(`GRANT CONNECT ON DATABASE postgres TO ${role}`);
    relayDir = mkdtempSync(path.join(os.tmpdir(), "relay-test-"));
    chmodSync(relayDir, 0o711); // as the node makes GPU_RELAY_DIR: the job's user passes through to its own folder
    relay = relayHost({
      platformUrl: `http://127.0.0.1:${platform.port}`,
      databaseHost: "127.0.0.1",
      databasePort: 5433,
      databaseSslMode: "prefer",
      dir: relayDir,
    });
  });
  beforeEach(() => {
    logDir = mkdtempSync(path.join(os.tmpdir(), "relay-logs-"));
    limits = { timeoutS: 60, graceS: 1, logDir };
  });
  afterEach(() => rmSync(logDir, { recursive: true, force: true }));
  afterAll(async () => {
    await admin.query(`REVOKE CONNECT ON DATABASE postgres FROM ${role}`);
    await admin.query(`DROP ROLE IF EXISTS ${role}`);
    await admin.end();
    platform.server.close();
    rmSync(relayDir, { recursive: true, force: true });
    if (mode === "docker") await removeContainersOf(docker, namespace);
  });

  test(`gpu-node relay (${mode}) - CI_PLATFORM_URL reaches the platform's HTTP API with the token, CI_DATABASE_URL_0 the tenant server with psql`, async () => {
    const job = run(
      'wget -qO- --header "Authorization: Bearer $CI_PLATFORM_TOKEN" "$CI_PLATFORM_URL/api/gpu/jobs?x=1"; echo; ' +
        'psql "$CI_DATABASE_URL_0" -Atc "select current_user, inet_server_port()"; echo "url=$CI_DATABASE_URL_0"',
    );
    const output = commandOutput(await job.outcome);
    expect(JSON.parse(output.split("\n")[0])).toEqual({ path: "/api/gpu/jobs?x=1", auth: `Bearer cit_${"a1".repeat(16)}` });
    expect(output).toContain(`${role}|5433\n`);
    expect(output).toContain(`url=postgresql://${role}:${encodeURIComponent(password)}@127.0.0.1:5432/postgres?sslmode=disable`);
    // Gone with the job: no folder, no socket to connect to.
    expect(existsSync(path.join(relayDir, job.jobId))).toBe(false);
  });

  test(`gpu-node relay (${mode}) - the job reaches nothing else: each other port and host is closed`, async () => {
    const targets = [
      "127.0.0.1:4222",
      "127.0.0.1:6379",
      "127.0.0.1:5433",
      "127.0.0.1:5434",
      `127.0.0.1:${platform.port}`,
      "127.0.0.1:3000",
      "10.0.0.1:80",
      "1.1.1.1:443",
    ];
    // nc (busybox's, or none: then /dev/tcp of bash is not there either) — wget says whether a TCP connect works.
    const probe = targets.map((t) => `wget -q -T 2 -O /dev/null http://${t}/ 2>/dev/null; echo "${t} $?"`).join("; ");
    const output = commandOutput(await run(`${probe}; psql -w -h 127.0.0.1 -p 5432 -U postgres -d postgres -Atc "select 1" 2>&1 | head -1`).outcome);
    for (const target of targets) expect(output).toMatch(new RegExp(`^${target.replace(/\./g, "\\.")} [1-9]`, "m"));
    // 127.0.0.1:5432 in the job is the tenant server through the relay, never the state server (trust): a password is asked.
    expect(output).toMatch(/password authentication failed|no password supplied/);
  });

  test(`gpu-node relay (${mode}) - 100 concurrent connections through the relay`, async () => {
    const command =
      'i=0; while [ $i -lt 100 ]; do wget -qO- "$CI_PLATFORM_URL/hold/100" > /tmp/r$i & i=$((i+1)); done; wait; for f in /tmp/r*; do grep -q hold $f && echo ok; done | wc -l';
    expect(commandOutput(await run(command).outcome)).toMatch(/^\s*100\n$/);
    expect(platform.inFlightMax()).toBeGreaterThanOrEqual(100);
  });

  test(`gpu-node relay (${mode}) - a node without a relay fails the job with the reason, never a value of the grant`, async () => {
    const outcome = await run("echo ran", grant(), { destinations: {}, dir: relayDir }).outcome;
    expect(outcome).toMatchObject({ type: "failed", errorMessage: expect.stringContaining("GPU_RELAY_PLATFORM_URL is not set") });
    expect(JSON.stringify(outcome)).not.toMatch(/cit_|p@ss/);
  });

  test(`gpu-node relay (${mode}) - the job's own NODE_OPTIONS reach its programs, not the forwarder (a relative --require would stop it)`, async () => {
    const job = run('echo "opts=$NODE_OPTIONS held=${CI_RELAY_JOB_NODE_OPTIONS:-none}"', grant(), undefined, { NODE_OPTIONS: "--require ./setup.js" });
    expect(commandOutput(await job.outcome)).toBe("opts=--require ./setup.js held=none\n");
  });

  if (mode === "docker")
    test("gpu-node relay (docker) - a job adopted after a node restart gets its relay again, closed when it ends", async () => {
      const job = run('sleep 2; wget -qO- "$CI_PLATFORM_URL/after-restart"');
      expect(await job.started).toBe(true);
      job.detach(); // the node stops; its container goes on
      // The stopped node lets go of the relay too (it no longer answers for the job, and holds nothing open).
      const connects = () =>
        new Promise<boolean>((resolve) => {
          const socket = net.connect(path.join(relayDir, job.jobId, PLATFORM_SOCKET));
          socket.once("connect", () => (socket.destroy(), resolve(true))).once("error", () => resolve(false));
        });
      await waitFor(async () => !(await connects()), { timeoutMs: 3000, message: "the stopped node's relay closed" });
      const adopted = (await (executor() as DockerExecutor).adopt([card.uuid])).find((j) => j.jobId === job.jobId)!;
      expect(
        JSON.parse(
          commandOutput(await adopted.outcome)
            .trim()
            .split("\n")
            .pop()!,
        ),
      ).toMatchObject({ path: "/after-restart" });
      expect(existsSync(path.join(relayDir, job.jobId))).toBe(false);
    });

  test(`gpu-node relay (${mode}) - a job without a grant: no relay, no variables`, async () => {
    const granted = run("sleep 1");
    const job = run("sleep 1; env | grep -c ^CI_ || true; ls /run/ci-platform 2>&1 | grep -c 'No such' ", null);
    expect([await granted.started, await job.started]).toEqual([true, true]);
    // While both run: the granted job's folder exists, the other's was never made.
    expect(readdirSync(relayDir)).toContain(granted.jobId);
    expect(readdirSync(relayDir)).not.toContain(job.jobId);
    expect(commandOutput(await job.outcome)).toBe("0\n1\n");
    await granted.outcome;
  });
});

test("gpu-node relay - a job without a grant launches with the same argv as before, and makes no folder", async () => {
  const workDir = mkdtempSync(path.join(os.tmpdir(), "relay-argv-"));
  try {
    const spec = { jobId: uniqueName("job"), card, command: "true" };
    const plain = await jobProcess(spec, testSandbox(), workDir);
    expect(plain.args.join(" ")).not.toMatch(/ci-platform|node/);
    // prlimit runs the job's shell itself (the launcher joins stderr into stdout: no outer shell).
    expect(plain.args.slice(-4)).toEqual(["--", "/bin/sh", "-c", "true"]);
    expect(plain.joinStderr).toBe(true);
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
});
