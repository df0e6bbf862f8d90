/**
 * bench:gateway — authenticated GET /api/auth/me (JWT and API key) at 50 connections: the
 * platform in one process, the platform over NATS (gateway and auth in separate processes), and
 * the same over the authenticated, permissioned TLS bus (its own nats-server with the generated
 * configuration), and a bare node:http server doing the same token check and PostgreSQL read, all
 * in one run. Goals: ≥ 50 % of the bare server in one process, ≥ 30 % over NATS, and the secure
 * bus within 10 % of the plain one.
 */
import { spawn } from "child_process";
import path from "path";
import { ChildService, dropDatabase, freePort, http, NATS_URL, spawnServices, testDatabaseUrl, uniqueName, waitFor } from "../test/support/platform";
import { BusServer, startBusServer } from "../test/support/bus-server";
import { load, LoadFigures, ratio } from "./lib/load";

const DURATION_S = Number(process.env.BENCH_DURATION_S || 5);
/** Alternating plain/secure bus measurements; the table shows each mode's median run. */
const BUS_ROUNDS = Number(process.env.BUS_ROUNDS || 3);

/** The run with the median requests/s. */
function median(runs: LoadFigures[]): LoadFigures {
  return [...runs].sort((x, y) => x.rps - y.rps)[Math.floor(runs.length / 2)];
}
const CONNECTIONS = 50;
const SECRET = "bench-secret";

async function ready(base: string, children: ChildService[]) {
  await waitFor(
    async () => {
      for (const c of children) if (c.proc.exitCode !== null) throw new Error(c.output());
      const res = await http(base, "GET", "/api/auth/me").catch(() => undefined);
      return res?.status === 401;
    },
    { timeoutMs: 30_000, message: `${base} to answer` },
  );
}

async function measure(label: string, base: string, jwt: string, apiKey: string, rows: Array<[string, string, LoadFigures]>) {
  await load(`${base}/api/auth/me`, { headers: { authorization: `Bearer ${jwt}` }, durationS: 1 }); // warm-up
  for (const [cred, token] of [
    ["JWT", jwt],
    ["API key", apiKey],
  ] as const) {
    const figures = await load(`${base}/api/auth/me`, { headers: { authorization: `Bearer ${token}` }, connections: CONNECTIONS, durationS: DURATION_S });
    if (figures.non2xx || figures.errors) throw new Error(`${label} ${cred}: ${figures.non2xx} non-2xx, ${figures.errors} errors`);
    rows.push([label, cred, figures]);
  }
}

async function main() {
  const databaseUrl = testDatabaseUrl();
  const children: ChildService[] = [];
  const common = { DATABASE_URL: databaseUrl, JWT_SECRET: SECRET, LOG_LEVEL: "warn", AUTH_RATE_LIMIT_PER_IP: "100000" };
  const rows: Array<[string, string, LoadFigures]> = [];
  const [p1, p2, p3, p4] = [await freePort(), await freePort(), await freePort(), await freePort()];
  let bus: BusServer | undefined;
  let busRounds: Array<[string, string, LoadFigures]>;
  try {
    // 1. one process
    const one = spawnServices(["api-gateway", "auth"], { ...common, PORT: String(p1), TRANSPORTER: "" });
    children.push(one);
    const base1 = `http://127.0.0.1:${p1}`;
    await ready(base1, children);
    const reg = await http(base1, "POST", "/api/auth/register", {
      body: { email: `${uniqueName("bench")}@example.com`, name: "Bench", password: "password-123" },
    });
    const jwt = reg.body.accessToken as string;
    const apiKey = (await http(base1, "POST", "/api/auth/api-keys", { token: jwt })).body.apiKey as string;
    await measure("one process", base1, jwt, apiKey, rows);
    await one.stop();
    children.length = 0;

    // 2. over NATS (gateway and auth in separate processes), on the plain bus and on the
    // authenticated, permissioned TLS bus (its own nats-server). Both stay up and are measured in
    // alternation, BUS_ROUNDS times, so load from elsewhere falls on both alike; medians count.
    const ns = { TRANSPORTER: NATS_URL, NAMESPACE: uniqueName("bench") };
    children.push(spawnServices(["api-gateway"], { ...common, ...ns, PORT: String(p2) }), spawnServices(["auth"], { ...common, ...ns }));
    const secureNs = uniqueName("bench");
    bus = await startBusServer({ namespace: secureNs, tls: true });
    const secure = (user: string) => ({ TRANSPORTER: bus!.urlFor(user), NATS_TLS_CA: bus!.certificates!.caFile, NAMESPACE: secureNs });
    children.push(
      spawnServices(["api-gateway"], { ...common, ...secure("api-gateway"), PORT: String(p4) }),
      spawnServices(["auth"], { ...common, ...secure("auth") }),
    );
    const [base2, base4] = [`http://127.0.0.1:${p2}`, `http://127.0.0.1:${p4}`];
    await ready(base2, children);
    await ready(base4, children);
    const rounds: Array<[string, string, LoadFigures]> = [];
    for (let r = 0; r < BUS_ROUNDS; r++) {
      await measure("over NATS", base2, jwt, apiKey, rounds);
      await measure("over NATS, auth + TLS", base4, jwt, apiKey, rounds);
    }
    for (const label of ["over NATS", "over NATS, auth + TLS"])
      for (const cred of ["JWT", "API key"]) rows.push([label, cred, median(rounds.filter(([l, c]) => l === label && c === cred).map(([, , f]) => f))]);
    busRounds = rounds;
    await Promise.all(children.map((c) => c.stop()));
    children.length = 0;

    // 3. bare node:http baseline
    const bare = spawn(process.execPath, ["--import", "tsx", path.join(__dirname, "bare-server.ts")], {
      env: { ...process.env, ...common, PORT: String(p3) },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const bareChild: ChildService = {
      proc: bare,
      output: () => "",
      stop: async () => {
        bare.kill();
        return null;
      },
    };
    children.push(bareChild);
    const base3 = `http://127.0.0.1:${p3}`;
    await waitFor(async () => (await http(base3, "GET", "/").catch(() => undefined))?.status === 401, { timeoutMs: 20_000, message: "bare server" });
    await measure("bare node:http", base3, jwt, apiKey, rows);
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await bus?.stop();
    await dropDatabase(databaseUrl).catch(() => undefined);
  }

  const bareOf = (cred: string) => rows.find(([l, c]) => l === "bare node:http" && c === cred)![2];
  console.log(`\nGET /api/auth/me, ${CONNECTIONS} connections, ${DURATION_S} s per run\n`);
  console.log("| mode | credential | req/s | p50 ms | p99 ms | vs bare |");
  console.log("|---|---|---|---|---|---|");
  for (const [label, cred, f] of rows)
    console.log(`| ${label} | ${cred} | ${f.rps} | ${f.p50} | ${f.p99} | ${label.startsWith("bare") ? "—" : ratio(f.rps, bareOf(cred).rps)} |`);
  const of = (label: string, cred: string) => rows.find(([l, c]) => l === label && c === cred)![2];
  console.log(`\nOver NATS: medians of ${BUS_ROUNDS} alternating runs; each run's req/s:`);
  for (const label of ["over NATS", "over NATS, auth + TLS"])
    for (const cred of ["JWT", "API key"])
      console.log(
        `- ${label}, ${cred}: ${busRounds
          .filter(([l, c]) => l === label && c === cred)
          .map(([, , f]) => f.rps)
          .join(", ")}`,
      );
  for (const cred of ["JWT", "API key"])
    console.log(
      `\nCost of bus security (${cred}): authenticated + TLS / plain NATS = ${ratio(of("over NATS, auth + TLS", cred).rps, of("over NATS", cred).rps)}`,
    );
  console.log("\nGoals: one process ≥ 50 % of bare, over NATS ≥ 30 % of bare, bus security ≤ 10 % throughput loss.");
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
