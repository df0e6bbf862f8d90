/**
 * Fails the run at once when a real server the tests need is not answering: no test is ever
 * skipped for a missing server (CI=true or not). `.ci/run` starts them on a fresh machine.
 */
import net from "net";

const REQUIRED: Array<[string, string, number]> = [
  ["PostgreSQL", "127.0.0.1", 5432],
  ["Redis", "127.0.0.1", 6379],
  ["NATS", "127.0.0.1", 4222],
];

function reachable(host: string, port: number, timeoutMs = 3000): Promise<boolean> {
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
  if (missing.length) throw new Error(`Servers the tests need are not answering: ${missing.join(", ")}. Run .ci/run or start them.`);
}
