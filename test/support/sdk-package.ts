/**
 * The SDK as its users get it: packed once (`npm pack`, which builds it), installed offline into
 * a temporary project, then used from there by plain Node and type-checked by this repository's
 * tsc. Also the small HTTP servers its checks run against: a reverse proxy under a path prefix,
 * and a scripted server for retries and timeouts.
 */
import { execFile, execFileSync } from "child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "fs";
import http from "http";
import type { AddressInfo } from "net";
import os from "os";
import path from "path";
import { ROOT } from "./platform";

const SDK_DIR = path.join(ROOT, "clients/sdk");

/** Packs the SDK and installs the tarball into a new project; returns the project's folder. */
export function installPackedSdk(): { project: string; tarball: string } {
  const work = mkdtempSync(path.join(os.tmpdir(), "sdk-pkg-"));
  const packed = execFileSync("npm", ["pack", "--pack-destination", work, "--silent"], { cwd: SDK_DIR, encoding: "utf8" });
  const tarball = path.join(work, packed.trim().split("\n").at(-1)!);
  const project = path.join(work, "project");
  mkdirSync(project);
  writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "sdk-user", version: "1.0.0", private: true }));
  // --offline: the package has no dependencies, so nothing may come from a registry.
  execFileSync("npm", ["install", tarball, "--offline", "--no-audit", "--no-fund", "--silent"], { cwd: project, encoding: "utf8" });
  return { project, tarball };
}

/** Runs `node file args…` in the project (asynchronously: the servers it calls live in this process); its stdout's last line as JSON. */
export function runNode(project: string, file: string, args: string[]): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [file, ...args], { cwd: project, encoding: "utf8", timeout: 60_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${file}: ${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, unknown>),
    ),
  );
}

/** Type-checks `files` of the project as a TypeScript user would (nodenext, strict, the package's own declarations checked too). */
export function typecheck(project: string, files: string[]): { ok: boolean; output: string } {
  const config = {
    compilerOptions: {
      module: "nodenext",
      moduleResolution: "nodenext",
      target: "ES2022",
      strict: true,
      noEmit: true,
      skipLibCheck: false,
      types: ["node"],
      typeRoots: [path.join(ROOT, "node_modules/@types")],
    },
    files,
  };
  writeFileSync(path.join(project, "tsconfig.json"), JSON.stringify(config));
  try {
    return { ok: true, output: execFileSync(path.join(ROOT, "node_modules/.bin/tsc"), ["-p", "."], { cwd: project, encoding: "utf8" }) };
  } catch (err) {
    return { ok: false, output: String((err as { stdout?: string }).stdout ?? err) };
  }
}

export type Served = { url: string; close(): Promise<void> };

function listen(server: http.Server): Promise<Served> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => new Promise<void>((done) => (server.closeAllConnections(), server.close(() => done()))),
      }),
    ),
  );
}

/** A reverse proxy that serves `target` under `prefix` only: a client that drops the prefix gets a plain 404. */
export function prefixProxy(target: string, prefix: string): Promise<Served> {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    if (!req.url?.startsWith(`${prefix}/`)) return void res.writeHead(404, { "content-type": "text/plain" }).end(`not under ${prefix}`);
    const forward = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url.slice(prefix.length), headers: req.headers },
      (answer) => (res.writeHead(answer.statusCode ?? 502, answer.headers), answer.pipe(res)),
    );
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  return listen(server);
}

/** What the scripted server saw of one client (keyed by its bearer token). */
export type Hits = Map<string, Array<{ method: string; at: number }>>;

/**
 * A server for the retry and timeout checks, scripted by the token a client sends:
 * `flaky-*` answers 503 with `Retry-After: 1`, then 429 with `Retry-After: 0`, then 200;
 * `broken-*` answers 502 always; `silent-*` never answers.
 */
export async function scriptedServer(): Promise<Served & { hits: Hits }> {
  const hits: Hits = new Map();
  const server = http.createServer((req, res) => {
    const token = (req.headers.authorization ?? "").replace(/^Bearer /, "");
    const seen = hits.get(token) ?? [];
    seen.push({ method: req.method ?? "", at: Date.now() });
    hits.set(token, seen);
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
      res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
    const error = (code: string) => ({ error: { code, message: code.toLowerCase(), details: null } });
    if (token.startsWith("silent-")) return;
    if (token.startsWith("broken-")) return json(502, error("PROVIDER_ERROR"));
    if (seen.length === 1) return json(503, error("SERVICE_UNAVAILABLE"), { "retry-after": "1" });
    if (seen.length === 2) return json(429, error("RATE_LIMITED"), { "retry-after": "0" });
    json(200, { email: `${token}@example.com` });
  });
  return { ...(await listen(server)), hits };
}
