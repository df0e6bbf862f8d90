/** docs/configuration.md lists exactly the variables the settings modules read, with their services and defaults (scripts/config-reference.ts). */
import { readFileSync } from "fs";
import { EXTERNAL, PAGE, pageRows, regeneratePage, settingsReads, type Read } from "../../scripts/config-reference";

describe("docs - configuration reference", () => {
  let reads: Read[];
  let page: string;
  beforeAll(() => {
    reads = settingsReads();
    page = readFileSync(PAGE, "utf8");
  }, 60_000); // the compiler reads the settings modules and what they import

  it("docs - every variable a settings module reads is in docs/configuration.md", () => {
    const listed = new Set(pageRows(page).flatMap((r) => r.variables));
    const missing = [...new Set(reads.map((r) => r.variable))].filter((v) => !listed.has(v)).sort();
    expect(missing).toEqual([]);
  });

  it("docs - docs/configuration.md lists no variable that no code reads", () => {
    const read = new Set([...reads.map((r) => r.variable), ...Object.keys(EXTERNAL)]);
    const stale = pageRows(page)
      .flatMap((r) => r.variables)
      .filter((v) => !read.has(v));
    expect(stale).toEqual([]);
  });

  it("docs - every row says what its variables mean", () => {
    expect(pageRows(page).filter((r) => !r.meaning.trim())).toEqual([]);
  });

  it("docs - the table is what npm run docs:config generates (services and defaults as the code states them)", () => {
    expect(regeneratePage(page, reads)).toBe(page);
  });

  it("docs - the reader finds variables through helpers, and the defaults the code states", () => {
    const of = (variable: string, service: string) => reads.find((r) => r.variable === variable && r.service === service);
    // Read through parseJwtSecret (lib/jwt.ts) and parseHeartbeatS (gpu-node's settings, called by the scheduler's).
    expect(of("JWT_SECRET", "auth")).toBeDefined();
    expect(of("GPU_HEARTBEAT_S", "gpu-scheduler")?.default).toBe(2);
    // 24 * 3600, a constant (DEFAULT_SHM_MB), a flag, a per-minute limit.
    expect(of("GPU_IDEMPOTENCY_TTL_S", "gpu-scheduler")?.default).toBe(86400);
    expect(of("GPU_JOB_SHM_MB", "gpu-node")?.default).toBe(1024);
    expect(of("TRUST_PROXY", "api-gateway")?.default).toBe(false);
    expect(of("INFERENCE_RPM", "inference")?.default).toBeNull();
    expect(of("NODE_ENV", "every process")).toBeDefined();
  });
});
