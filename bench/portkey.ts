/**
 * Portkey's open-source AI gateway (@portkey-ai/gateway on npm) for bench:inference: installed
 * into a temporary folder (or PORTKEY_DIR, reused when it already holds it), started on a free
 * port, headless. Requests name the upstream with `x-portkey-provider: openai` and
 * `x-portkey-custom-host: <stand-in>/v1`.
 */
import { ChildProcess, spawn, spawnSync } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";

export const PORTKEY_VERSION = "1.15.2";

export type Portkey = { port: number; proc: ChildProcess; stop(): void };

/** The install folder, or a reason there is none (no network, npm failing). */
export function installPortkey(): { dir: string } | { error: string } {
  const dir = process.env.PORTKEY_DIR || fs.mkdtempSync(path.join(os.tmpdir(), "portkey-"));
  if (fs.existsSync(entryOf(dir))) return { dir };
  const npm = spawnSync("npm", ["install", "--prefix", dir, `@portkey-ai/gateway@${PORTKEY_VERSION}`, "--no-audit", "--no-fund", "--loglevel=error"], {
    encoding: "utf8",
    timeout: 300_000,
  });
  return fs.existsSync(entryOf(dir)) ? { dir } : { error: `npm install failed: ${(npm.stderr || String(npm.error ?? "")).trim().slice(0, 300)}` };
}

const entryOf = (dir: string) => path.join(dir, "node_modules/@portkey-ai/gateway/build/start-server.js");

/** Starts it; resolves once it says it is ready for connections. */
export function startPortkey(dir: string, port: number): Promise<Portkey> {
  const proc = spawn(process.execPath, [entryOf(dir), `--port=${port}`, "--headless"], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Portkey did not start: ${output.slice(-500)}`)), 30_000);
    const onData = (d: Buffer) => {
      output += d;
      if (!output.includes("Ready for connections")) return;
      clearTimeout(timer);
      proc.stdout!.off("data", onData);
      proc.stdout!.resume();
      resolve({ port, proc, stop: () => void proc.kill() });
    };
    proc.stdout!.on("data", onData);
    proc.stderr!.on("data", (d) => (output = (output + d).slice(-4000)));
    proc.once("exit", (code) => reject(new Error(`Portkey exited (${code}): ${output.slice(-500)}`)));
  });
}
