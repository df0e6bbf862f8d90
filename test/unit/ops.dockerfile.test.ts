/**
 * The Dockerfile, read statically (no registry is reachable to pull its base image in CI):
 * multi-stage on node:20-bookworm-slim, compiled JS with production dependencies only, a non-root
 * user, node as PID 1, and nothing secret in the image or its build context.
 */
import fs from "fs";
import path from "path";

const ROOT = path.resolve(__dirname, "../..");
const dockerfile = fs.readFileSync(path.join(ROOT, "Dockerfile"), "utf8");
const ignore = fs
  .readFileSync(path.join(ROOT, ".dockerignore"), "utf8")
  .split("\n")
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith("#"));

type Instruction = { op: string; args: string };
type Stage = { base: string; name: string; instructions: Instruction[] };

/** Dockerfile → stages of instructions (continuation lines joined, comments dropped). */
function parseDockerfile(text: string): { args: Record<string, string>; stages: Stage[] } {
  const lines = text
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, op, rest] = /^(\S+)\s+(.*)$/.exec(line) ?? [];
    const upper = op.toUpperCase();
    if (upper === "FROM") {
      const [, base, name] = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest) ?? [];
      stages.push({ base: base.replace(/\$\{(\w+)\}/g, (_, v) => args[v] ?? ""), name: name ?? String(stages.length), instructions: [] });
    } else if (upper === "ARG" && stages.length === 0) {
      const [k, v] = rest.split("=");
      args[k] = v;
    } else {
      stages[stages.length - 1].instructions.push({ op: upper, args: rest });
    }
  }
  return { args, stages };
}

const { stages } = parseDockerfile(dockerfile);
const final = stages[stages.length - 1];
const all = (stage: Stage, op: string) => stage.instructions.filter((i) => i.op === op).map((i) => i.args);

describe("ops - Dockerfile", () => {
  it("ops - multi-stage on node:20-bookworm-slim: build, production dependencies, runtime", () => {
    expect(stages.map((s) => s.name)).toEqual(["build", "deps", "runtime"]);
    for (const s of stages) expect(s.base).toBe("node:20-bookworm-slim");
    expect(all(stages[0], "RUN")).toEqual(expect.arrayContaining(["npm ci --no-audit --no-fund", "npm run build"]));
    expect(all(stages[1], "RUN").join(" ")).toMatch(/npm ci --omit=dev/);
  });

  it("ops - the runtime holds compiled JS and production modules only, and runs node on dist/index.js", () => {
    const copies = all(final, "COPY");
    expect(copies).toContain("--from=build /app/dist ./dist");
    expect(copies).toContain("--from=deps /app/node_modules ./node_modules");
    expect(copies.filter((c) => !c.startsWith("--from="))).toEqual(["package.json ./"]);
    expect(all(final, "RUN").join(" ")).not.toMatch(/npm (ci|install)/);
    expect(all(final, "CMD")).toEqual(['["node", "dist/index.js"]']);
    expect(all(final, "ENTRYPOINT")).toEqual([]);
    expect(all(final, "ENV").join(" ")).toMatch(/NODE_ENV=production/);
    // The build script the image relies on exists, compiles with tsc and brings the console's static files.
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
    expect(pkg.scripts.build).toMatch(/^tsc -p tsconfig\.build\.json && .*cpSync\('console', 'dist\/console'/);
  });

  it("ops - the process runs as a non-root user", () => {
    const users = all(final, "USER");
    expect(users).toHaveLength(1);
    expect(users[0]).not.toMatch(/^(root|0)(:|$)/);
    // USER comes after every instruction that needs root.
    const last = final.instructions.map((i) => i.op).lastIndexOf("RUN");
    expect(final.instructions.findIndex((i) => i.op === "USER")).toBeGreaterThan(last);
  });

  it("ops - no secret is baked into the image, and the build context leaves secrets and state out", () => {
    for (const s of stages)
      for (const i of s.instructions.filter((x) => x.op === "ENV" || x.op === "ARG")) expect(i.args).not.toMatch(/SECRET|PASSWORD|TOKEN|API_KEY|DATABASE_URL/i);
    for (const entry of [".env", ".git", "**/node_modules", "dist", "scratch", "test"]) expect(ignore).toContain(entry);
    expect(ignore).toContain("!.env.example");
  });

  it("ops - every folder the compiled entry point needs is copied into the build stage", () => {
    const copied = all(stages[0], "COPY").join(" ");
    // Whatever the build compiles (tsconfig.build.json "include") must be in the image's build stage.
    const include: string[] = JSON.parse(fs.readFileSync(path.join(ROOT, "tsconfig.build.json"), "utf8")).include;
    const dirs = include.filter((entry) => !entry.endsWith(".ts"));
    expect(dirs).toEqual(expect.arrayContaining(["lib", "middlewares", "mixins", "services", "types"]));
    for (const dir of dirs) expect(copied).toContain(`${dir} ./${dir}`);
    for (const file of ["index.ts", "moleculer.config.ts", "tsconfig.json", "tsconfig.build.json"]) expect(copied).toContain(file);
    const topLevel = fs.readdirSync(ROOT).filter((f) => f.endsWith(".ts"));
    expect(topLevel.sort()).toEqual(["index.ts", "moleculer.config.ts"]);
  });
});
