/**
 * bench:auth-memory — what a burst of logins does to the auth process's memory at OWASP's cost
 * (scrypt N = 2^17, r = 8: 128 MiB a hash), in one run: auth with no effective cap
 * (AUTH_HASH_CONCURRENCY=64, as before issue 18: libuv's 4 threads hash at once) against the
 * default cap (2 at once, 16 waiting), alternating, ROUNDS times. Each round starts a fresh
 * process (gateway and auth, SERVICES=api-gateway,auth), registers one account, sends BURST
 * logins at once, samples the process's RSS, and prints its RSS before, its peak, and how many
 * logins got 200 and 503. min / median / max over rounds.
 */
import { readFileSync } from "fs";
import { dropDatabase, freePort, http, spawnServices, testDatabaseUrl, uniqueName, waitForRoute } from "../test/support/platform";
import { spread } from "./lib/spread";

const BURST = Number(process.env.BURST ?? 16);
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const CONFIGS = { uncapped: "64", capped: "2" } as const;
type Config = keyof typeof CONFIGS;
type Round = { baseMiB: number; peakMiB: number; ok: number; refused: number; seconds: number };

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

async function round(concurrency: string): Promise<Round> {
  const port = await freePort();
  const databaseUrl = testDatabaseUrl();
  const service = spawnServices(["api-gateway", "auth"], {
    PORT: String(port),
    DATABASE_URL: databaseUrl,
    NAMESPACE: uniqueName("bench"),
    SCRYPT_LOG_N: "17",
    AUTH_HASH_CONCURRENCY: concurrency,
    AUTH_RATE_LIMIT_PER_IP: "100000",
    AUTH_RATE_LIMIT_PER_EMAIL: "100000",
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitForRoute(baseUrl, "POST", "/api/auth/login", 60_000);
    const body = { email: `${uniqueName("bench")}@example.com`, password: "correct horse battery" };
    const registered = await http(baseUrl, "POST", "/api/auth/register", { body: { ...body, name: "Bench" } });
    if (registered.status !== 201) throw new Error(`register answered ${registered.status}: ${registered.text}`);
    const pid = service.proc.pid!;
    const baseMiB = rssMiB(pid);
    let peakMiB = baseMiB;
    const sampler = setInterval(() => (peakMiB = Math.max(peakMiB, rssMiB(pid))), 10);
    const t0 = performance.now();
    const answers = await Promise.all(Array.from({ length: BURST }, () => http(baseUrl, "POST", "/api/auth/login", { body })));
    clearInterval(sampler);
    peakMiB = Math.max(peakMiB, rssMiB(pid));
    const ok = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 503 && a.headers.get("retry-after")).length;
    if (ok + refused !== BURST) throw new Error(`unexpected answers: ${answers.map((a) => a.status).join(",")}`);
    return { baseMiB, peakMiB, ok, refused, seconds: (performance.now() - t0) / 1000 };
  } finally {
    await service.stop();
    await dropDatabase(databaseUrl).catch(() => undefined);
  }
}

async function main() {
  const results: Record<Config, Round[]> = { uncapped: [], capped: [] };
  for (let i = 0; i < ROUNDS; i++) {
    const order: Config[] = i % 2 ? ["capped", "uncapped"] : ["uncapped", "capped"];
    for (const config of order) results[config].push(await round(CONFIGS[config]));
  }
  console.log(`bench:auth-memory — ${BURST} concurrent logins at scrypt N=2^17 (128 MiB a hash), ${ROUNDS} rounds alternating, min / median / max`);
  const rows: Array<[string, (r: Round) => number]> = [
    ["RSS before the burst (MiB)", (r) => r.baseMiB],
    ["peak RSS during the burst (MiB)", (r) => r.peakMiB],
    ["logins answered 200", (r) => r.ok],
    ["logins answered 503 + Retry-After", (r) => r.refused],
    ["burst wall time (s)", (r) => r.seconds],
  ];
  for (const [label, pick] of rows) {
    const cells = (Object.keys(CONFIGS) as Config[]).map((c) => `${c} (${CONFIGS[c]} at once) ${spread(results[c].map(pick), 1).padEnd(22)}`);
    console.log(`  ${label.padEnd(36)} ${cells.join(" ")}`);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
