/**
 * The node-side relay (relay.ts) against the real tenant servers: the job's URL works with `pg`
 * as given (sslmode=disable: the leg inside the host), the relay speaks TLS to a TLS-only server
 * and checks its certificate (verify-full), refuses a server that cannot (require against a plain
 * one), and is gone — sockets, folder, open connections — once closed.
 */
import { chmodSync, existsSync, mkdtempSync, rmSync } from "fs";
import net from "net";
import os from "os";
import path from "path";
import { Client } from "pg";
import { platformEnv, relayHost } from "../../services/gpu-node/platform-access";
import { JobRelay, RelaySslMode } from "../../services/gpu-node/relay";
import { DATABASE_SOCKET, forwarderArgv, PLATFORM_SOCKET } from "../../services/gpu-node/relay-forwarder";
import { OpenAiStandin } from "../support/provider-standins";
import { execFile } from "child_process";
import { promisify } from "util";
import { uniqueName, waitFor } from "../support/platform";

const CA = process.env.TEST_TENANT_TLS_CA || "/etc/ci-platform/tenant-tls-ca.pem";
const ADMINS: Record<number, string> = {
  5433: process.env.TEST_TENANT_ADMIN_URL || "postgresql://ci_admin:ci-tenant-admin@127.0.0.1:5433/postgres",
  5434: process.env.TEST_TENANT_TLS_ADMIN_URL || `postgresql://ci_admin:ci-tenant-admin@127.0.0.1:5434/postgres?sslmode=verify-full&sslrootcert=${CA}`,
};

/** A `pg` client for the job's own URL, its TCP connect replaced by the relay's socket (the forwarder's part). */
function clientThrough(url: string, socket: string): Client {
  return new Client({
    connectionString: url,
    stream: () => {
      const stream = new net.Socket();
      const connect = stream.connect.bind(stream);
      return Object.assign(stream, { connect: () => connect(socket) });
    },
  });
}

describe("gpu-node relay upstream", () => {
  const role = uniqueName("relay_up");
  const password = "s3cret:/@";
  let base: string;
  const admins: Client[] = [];

  beforeAll(async () => {
    base = mkdtempSync(path.join(os.tmpdir(), "relay-up-"));
    chmodSync(base, 0o711);
    for (const url of Object.values(ADMINS)) {
      const admin = new Client({ connectionString: url });
      await admin.connect();
      await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
      await admin.query(`GRANT CONNECT ON DATABASE postgres TO ${role}`);
      admins.push(admin);
    }
  });
  afterAll(async () => {
    for (const admin of admins) {
      await admin.query(`REVOKE CONNECT ON DATABASE postgres FROM ${role}`);
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    }
    rmSync(base, { recursive: true, force: true });
  });

  const openRelay = (port: number, sslMode: RelaySslMode, caFile: string | null = CA) => {
    const host = relayHost({ databaseHost: "127.0.0.1", databasePort: port, databaseSslMode: sslMode, databaseCaFile: caFile ?? undefined, dir: base });
    return JobRelay.open(path.join(base, uniqueName("job")), host.destinations);
  };
  const jobUrl = () => platformEnv({ token: `cit_${"b".repeat(32)}`, databases: [{ database: "postgres", user: role, password }] }).CI_DATABASE_URL_0;

  test.each([
    ["a plain server, prefer", 5433, "prefer" as const, false],
    ["a TLS-only server, prefer", 5434, "prefer" as const, true],
    ["a TLS-only server, verify-full against the CA", 5434, "verify-full" as const, true],
  ])("gpu-node relay upstream - `pg` with the job's URL reaches %s", async (_name, port, sslMode, encrypted) => {
    const relay = await openRelay(port, sslMode);
    const client = clientThrough(jobUrl(), path.join(relay.dir, DATABASE_SOCKET));
    try {
      await client.connect();
      const { rows } = await client.query(
        "select current_user as who, inet_server_port() as port, (select ssl from pg_stat_ssl where pid = pg_backend_pid()) as ssl",
      );
      expect(rows[0]).toEqual({ who: role, port, ssl: encrypted });
    } finally {
      await client.end().catch(() => undefined);
      await relay.close();
    }
  });

  test.each([
    ["require against a server without TLS: refused, not downgraded", 5433, "require" as const, CA],
    ["verify-full against a certificate the node does not trust: refused", 5434, "verify-full" as const, null],
  ])("gpu-node relay upstream - %s", async (_name, port, sslMode, caFile) => {
    const relay = await openRelay(port, sslMode, caFile);
    const client = clientThrough(jobUrl(), path.join(relay.dir, DATABASE_SOCKET));
    try {
      await expect(client.connect()).rejects.toThrow();
    } finally {
      await relay.close();
    }
  });

  test("gpu-node relay upstream - closing the relay cuts open connections and removes its sockets and folder", async () => {
    const relay = await openRelay(5433, "prefer");
    const socket = path.join(relay.dir, DATABASE_SOCKET);
    const client = clientThrough(jobUrl(), socket);
    await client.connect();
    const ended = new Promise((resolve) => client.once("error", resolve).once("end", resolve));
    await relay.close();
    await ended;
    expect(existsSync(relay.dir)).toBe(false);
    const refused = await new Promise((resolve) =>
      net
        .connect(socket)
        .once("error", resolve)
        .once("connect", () => resolve(null)),
    );
    expect(refused).toMatchObject({ code: "ENOENT" });
    // The tenant server sees the session end too.
    await waitFor(async () => (await admins[0].query("select count(*)::int as n from pg_stat_activity where usename = $1", [role])).rows[0].n === 0, {
      timeoutMs: 5000,
    });
  });

  test("gpu-node relay upstream - the official `openai` client, behind the job's forwarder (run on the host, on a free port) and the relay", async () => {
    const token = `cit_${"c".repeat(32)}`;
    const standin = await new OpenAiStandin().start();
    standin.apiKey = token;
    const relay = await JobRelay.open(
      path.join(base, uniqueName("job")),
      relayHost({ platformUrl: standin.url, databasePort: 5432, databaseSslMode: "prefer", dir: base }).destinations,
    );
    try {
      const port = await new Promise<number>((resolve) => {
        const probe = net.createServer().listen(0, "127.0.0.1", () => {
          const { port } = probe.address() as net.AddressInfo;
          probe.close(() => resolve(port));
        });
      });
      const client = `const OpenAI = require(${JSON.stringify(require.resolve("openai"))}).default;
        const c = new OpenAI({ baseURL: process.env.CI_PLATFORM_URL + "/v1", apiKey: process.env.CI_PLATFORM_TOKEN, maxRetries: 0 });
        c.models.list().then((page) => console.log(page.data.map((m) => m.id).join(",")), (e) => { console.error(e.message); process.exit(3); });`;
      const argv = forwarderArgv([process.execPath], [{ port, socket: path.join(relay.dir, PLATFORM_SOCKET) }], [process.execPath, "-e", client]);
      const env = {
        PATH: process.env.PATH ?? "",
        CI_PLATFORM_URL: platformEnv({ token, databases: [] }).CI_PLATFORM_URL.replace(":8080", `:${port}`),
        CI_PLATFORM_TOKEN: token,
      };
      const { stdout } = await promisify(execFile)(argv[0], argv.slice(1), { env });
      expect(stdout.trim()).toBe(standin.models.map((m) => m.id).join(","));
    } finally {
      await relay.close();
      await standin.stop();
    }
  });
});
