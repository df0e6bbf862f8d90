/**
 * bench:gateway — authenticated GET /api/auth/me (JWT, API key and restricted token) at 50 connections: the
 * platform in one process, the platform over NATS (gateway and auth in separate processes), the
 * same over the authenticated, permissioned TLS bus (its own nats-server with the generated
 * configuration), and a bare node:http server doing the same token check and PostgreSQL read, all
 * in one run. All four stay up and are measured ROUNDS times in an order that changes every round
 * (rotated, and reversed every other round), so none always runs first or last; each figure is
 * printed as min / median / max, and ratios are of medians measured in this run. Goals: ≥ 50 % of
 * the bare server in one process, ≥ 30 % over NATS, the secure bus within 10 % of the plain one, and
 * a restricted token within 5 % of the API key (both resolved by SHA-256 and cached ≤ 1 s).
 */
import { spawn } from "child_process";
import path from "path";
import { ChildService, dropDatabase, freePort, http, NATS_URL, spawnServices, testDatabaseUrl, uniqueName, waitFor } from "../test/support/platform";
import { BusServer, startBusServer } from "../test/support/bus-server";
import { load, LoadFigures, ratio } from "./lib/load";
import { median, spread } from "./lib/spread";

const DURATION_S = Number(process.env.BENCH_DURATION_S || 5);
/** Rounds over all modes (BUS_ROUNDS: its former name). */
const ROUNDS = Number(process.env.BENCH_ROUNDS || process.env.BUS_ROUNDS || 3);
const CONNECTIONS = 50;
const SECRET = "bench-secret";
const MODES = ["one process", "over NATS", "over NATS, auth + TLS", "bare node:http"] as const;
type Mode = (typeof MODES)[number];
const CREDENTIALS = ["JWT", "API key", "restricted token"] as const;
type Run = { mode: Mode; cred: (typeof CREDENTIALS)[number]; figures: LoadFigures };

async function ready(base: string, children: ChildService[], status = 401, urlPath = "/api/auth/me") {
  await waitFor(
    async () => {
      for (const c of children) if (c.proc.exitCode !== null) throw new Error(c.output());
      const res = await http(base, "GET", urlPath).catch(() => undefined);
      return res?.status === status;
    },
    { timeoutMs: 30_000, message: `${base} to answer` },
  );
}

async function measure(mode: Mode, base: string, tokens: Record<Run["cred"], string>, runs: Run[]) {
  await load(`${base}/api/auth/me`, { headers: { authorization: `Bearer ${tokens.JWT}` }, durationS: 1 }); // warm-up
  for (const cred of CREDENTIALS) {
    const figures = await load(`${base}/api/auth/me`, {
      headers: { authorization: `Bearer ${tokens[cred]}` },
      connections: CONNECTIONS,
      durationS: DURATION_S,
    });
    if (figures.non2xx || figures.errors) throw new Error(`${mode} ${cred}: ${figures.non2xx} non-2xx, ${figures.errors} errors`);
    runs.push({ mode, cred, figures });
  }
}

/** Round `r`'s order: the modes rotated by r, reversed on odd rounds. */
function roundOrder<T>(items: readonly T[], r: number): T[] {
  const rotated = items.map((_, i) => items[(i + r) % items.length]);
  return r % 2 ? rotated.reverse() : rotated;
}

async function main() {
  const databaseUrl = testDatabaseUrl();
  const children: ChildService[] = [];
  const common = { DATABASE_URL: databaseUrl, JWT_SECRET: SECRET, LOG_LEVEL: "warn", AUTH_RATE_LIMIT_PER_IP: "100000" };
  const runs: Run[] = [];
  const [p1, p2, p3, p4] = [await freePort(), await freePort(), await freePort(), await freePort()];
  let bus: BusServer | undefined;
  try {
    // One process; gateway and auth over the plain NATS; the same over the authenticated TLS bus.
    children.push(spawnServices(["api-gateway", "auth"], { ...common, PORT: String(p1), TRANSPORTER: "" }));
    const ns = { TRANSPORTER: NATS_URL, NAMESPACE: uniqueName("bench") };
    children.push(spawnServices(["api-gateway"], { ...common, ...ns, PORT: String(p2) }), spawnServices(["auth"], { ...common, ...ns }));
    const secureNs = uniqueName("bench");
    bus = await startBusServer({ namespace: secureNs, tls: true });
    const secure = (user: string) => ({ TRANSPORTER: bus!.urlFor(user), NATS_TLS_CA: bus!.certificates!.caFile, NAMESPACE: secureNs });
    children.push(
      spawnServices(["api-gateway"], { ...common, ...secure("api-gateway"), PORT: String(p4) }),
      spawnServices(["auth"], { ...common, ...secure("auth") }),
    );
    // The bare node:http baseline.
    const bare = spawn(process.execPath, ["--import", "tsx", path.join(__dirname, "bare-server.ts")], {
      env: { ...process.env, ...common, PORT: String(p3) },
      stdio: ["ignore", "pipe", "inherit"],
    });
    children.push({
      proc: bare,
      output: () => "",
      stop: async () => {
        bare.kill();
        return null;
      },
    });
    const bases: Record<Mode, string> = {
      "one process": `http://127.0.0.1:${p1}`,
      "over NATS": `http://127.0.0.1:${p2}`,
      "over NATS, auth + TLS": `http://127.0.0.1:${p4}`,
      "bare node:http": `http://127.0.0.1:${p3}`,
    };
    for (const mode of MODES) await ready(bases[mode], children, 401, mode === "bare node:http" ? "/" : "/api/auth/me");
    const reg = await http(bases["one process"], "POST", "/api/auth/register", {
      body: { email: `${uniqueName("bench")}@example.com`, name: "Bench", password: "password-123" },
    });
    const jwt = reg.body.accessToken as string;
    const apiKey = (await http(bases["one process"], "POST", "/api/auth/api-keys", { token: jwt })).body.apiKey as string;
    const restricted = (await http(bases["one process"], "POST", "/api/auth/tokens", { token: jwt, body: { name: "bench", scopes: ["usage:read"] } })).body
      .token as string;
    const tokens = { JWT: jwt, "API key": apiKey, "restricted token": restricted };
    for (let r = 0; r < ROUNDS; r++) for (const mode of roundOrder(MODES, r)) await measure(mode, bases[mode], tokens, runs);
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await bus?.stop();
    await dropDatabase(databaseUrl).catch(() => undefined);
  }

  const of = (mode: Mode, cred: string) => runs.filter((r) => r.mode === mode && r.cred === cred).map((r) => r.figures);
  const medianRps = (mode: Mode, cred: string) => median(of(mode, cred).map((f) => f.rps));
  console.log(`\nGET /api/auth/me, ${CONNECTIONS} connections, ${DURATION_S} s per run, ${ROUNDS} rounds in changing order; min / median / max\n`);
  console.log("| mode | credential | req/s | p50 ms | p99 ms | vs bare (medians) |");
  console.log("|---|---|---|---|---|---|");
  for (const mode of MODES)
    for (const cred of CREDENTIALS) {
      const col = (pick: (f: LoadFigures) => number) => spread(of(mode, cred).map(pick), 0);
      const vsBare = mode === "bare node:http" ? "—" : ratio(medianRps(mode, cred), medianRps("bare node:http", cred));
      console.log(`| ${mode} | ${cred} | ${col((f) => f.rps)} | ${col((f) => f.p50)} | ${col((f) => f.p99)} | ${vsBare} |`);
    }
  for (const cred of CREDENTIALS)
    console.log(
      `\nCost of bus security (${cred}): authenticated + TLS / plain NATS = ${ratio(medianRps("over NATS, auth + TLS", cred), medianRps("over NATS", cred))}`,
    );
  for (const mode of MODES) console.log(`Restricted token / API key (${mode}) = ${ratio(medianRps(mode, "restricted token"), medianRps(mode, "API key"))}`);
  console.log("\nGoals: one process ≥ 50 % of bare, over NATS ≥ 30 % of bare, bus security ≤ 10 % throughput loss, restricted token ≥ 95 % of the API key.");
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
