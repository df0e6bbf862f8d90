/**
 * Fails the run at once when a real server the tests need is not answering: no test is ever
 * skipped for a missing server (CI=true or not). `.ci/run` starts them on a fresh machine.
 * Then builds the CLI (scripts/build-cli.js), so its tests run it as `npm run build:cli` ships it.
 */
import net from "net";
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { buildCli } = require("../../scripts/build-cli.js") as { buildCli(): Promise<string> };

const REQUIRED: Array<[string, string, number]> = [
  ["PostgreSQL", "127.0.0.1", 5432],
  ["Redis", "127.0.0.1", 6379],
  ["NATS", "127.0.0.1", 4222],
  ["the tenant PostgreSQL cluster (.ci/setup.d/30-tenant-postgres.sh)", "127.0.0.1", 5433],
];

const DOCKER_SOCKET = process.env.DOCKER_SOCKET || "/var/run/docker.sock";
/** How long a server may take to accept a connection before it counts as missing. */
const CONNECT_DEADLINE_MS = 3000;

function dockerAnswers(): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(DOCKER_SOCKET);
    socket.setTimeout(CONNECT_DEADLINE_MS, () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("connect", () => socket.write("GET /_ping HTTP/1.0\r\n\r\n"));
    socket.once("data", (d) => {
      socket.destroy();
      resolve(/^HTTP\/1\.[01] 200/.test(d.toString()));
    });
    socket.once("error", () => resolve(false));
  });
}

function reachable(host: string, port: number, timeoutMs = CONNECT_DEADLINE_MS): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

export default async function globalSetup(): Promise<void> {
  const missing: string[] = [];
  for (const [name, host, port] of REQUIRED) if (!(await reachable(host, port))) missing.push(`${name} (${host}:${port})`);
  if (!(await dockerAnswers())) missing.push(`the Docker engine (${DOCKER_SOCKET}, .ci/setup.d/20-docker.sh)`);
  if (missing.length) throw new Error(`Servers the tests need are not answering: ${missing.join(", ")}. Run .ci/run or start them.`);
  await buildCli();
}
