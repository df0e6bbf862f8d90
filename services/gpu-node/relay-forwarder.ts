/**
 * The relay's part inside a job (issue 28): a small Node.js program, run by the host's own node
 * binary (bound read-only into the job), that listens on 127.0.0.1:<port> in the job's empty
 * network namespace and pipes each connection to one unix socket of the node-side relay
 * (relay.ts). It only ever connects to those sockets, so it opens nothing the job could not reach
 * already. It listens first, then runs the job's command as its child (so the job never races its
 * listener), passes signals on and exits with the job's status: it lives and dies with the job.
 */
import os from "os";
import path from "path";

/** Where the relay's socket folder appears inside a job (sandbox and container alike). */
export const RELAY_MOUNT = "/run/ci-platform";
/** The loopback ports inside the job: the platform's HTTP API, and PostgreSQL on its usual port. */
export const RELAY_HTTP_PORT = 8080;
export const RELAY_PG_PORT = 5432;
export const PLATFORM_SOCKET = "platform.sock";
export const DATABASE_SOCKET = "postgres.sock";

/**
 * One listener: a port on the job's loopback piped to a unix socket path inside the job; or,
 * `inbound` (a deployment's replica, issue 29), a unix socket the forwarder makes inside the job,
 * each connection to it piped to the job's own 127.0.0.1:<port> (the node connects from outside).
 */
export type ForwardRoute = { port: number; socket: string; inbound?: boolean };

/** The job's own NODE_OPTIONS, held here while the forwarder (a Node.js program too) starts, and given back to the job. */
const HELD_NODE_OPTIONS = "CI_RELAY_JOB_NODE_OPTIONS";

/** The environment the forwarder starts with: the job's, its NODE_OPTIONS (meant for its own programs, e.g. a relative --require) held aside. */
export function forwarderEnv(env: Record<string, string>): Record<string, string> {
  if (!("NODE_OPTIONS" in env)) return env;
  const { NODE_OPTIONS, ...rest } = env;
  return { ...rest, [HELD_NODE_OPTIONS]: NODE_OPTIONS };
}

/**
 * Plain JavaScript (run with `node -e`, no file to bind); argv: `<port>=<socket>…` (and
 * `@<socket>=<port>` for an inbound route), `--`, the job's argv. Exit 125 when a listener cannot be opened (the job's command never ran).
 */
const FORWARDER = `"use strict";
const net = require("net"), { spawn } = require("child_process"), { constants } = require("os");
const args = process.argv.slice(1), sep = args.indexOf("--"), HELD = "${HELD_NODE_OPTIONS}";
const fail = (err) => { process.stderr.write("ci-platform relay: " + err.message + "\\n"); process.exit(125); };
const pipe = (a, b) => { const end = () => { a.destroy(); b.destroy(); };
  for (const s of [a, b]) { s.on("error", end); s.setNoDelay(true); }
  a.pipe(b); b.pipe(a); };
const listen = (route) => new Promise((resolve, reject) => {
  if (route.startsWith("@")) {
    const at = route.lastIndexOf("="), socket = route.slice(1, at), port = Number(route.slice(at + 1));
    const server = net.createServer({ allowHalfOpen: true }, (c) => pipe(c, net.connect({ port, host: "127.0.0.1", allowHalfOpen: true })));
    server.once("error", reject);
    return server.listen(socket, resolve);
  }
  const at = route.indexOf("="), port = Number(route.slice(0, at)), socket = route.slice(at + 1);
  const server = net.createServer({ allowHalfOpen: true }, (c) => pipe(c, net.connect({ path: socket, allowHalfOpen: true })));
  server.once("error", reject);
  server.listen(port, "127.0.0.1", resolve);
});
const env = { ...process.env };
if (HELD in env) { env.NODE_OPTIONS = env[HELD]; delete env[HELD]; }
Promise.all(args.slice(0, sep).map(listen)).then(() => {
  const argv = args.slice(sep + 1), child = spawn(argv[0], argv.slice(1), { stdio: "inherit", env });
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"]) process.on(sig, () => child.kill(sig));
  child.once("error", fail);
  child.once("exit", (code, sig) => process.exit(code ?? 128 + (constants.signals[sig] || 0)));
}, fail);
`;

/** The argv that runs `jobArgv` behind the forwarder, with `node` the path of a node binary inside the job. */
export function forwarderArgv(node: string[], routes: ForwardRoute[], jobArgv: string[]): string[] {
  return [...node, "-e", FORWARDER, "--", ...routes.map((r) => (r.inbound ? `@${r.socket}=${r.port}` : `${r.port}=${r.socket}`)), "--", ...jobArgv];
}

/** The routes of a job: HTTP always, PostgreSQL when the job has databases. */
export function forwardRoutes(withDatabase: boolean): ForwardRoute[] {
  const http = { port: RELAY_HTTP_PORT, socket: path.posix.join(RELAY_MOUNT, PLATFORM_SOCKET) };
  return withDatabase ? [http, { port: RELAY_PG_PORT, socket: path.posix.join(RELAY_MOUNT, DATABASE_SOCKET) }] : [http];
}

/** The node binary a job runs the forwarder with: this process's own (it must be visible inside: under /usr for a sandbox). */
export const hostNode = (): string => process.execPath;

/** The dynamic loader and library folder of the host's node, for running it from a bind inside an image that has neither. */
export function loaderOf(arch = os.arch()): { loader: string; libs: string } {
  const triplet = arch === "arm64" ? "aarch64-linux-gnu" : "x86_64-linux-gnu";
  const loader = arch === "arm64" ? "ld-linux-aarch64.so.1" : "ld-linux-x86-64.so.2";
  return { loader: `/usr/lib/${triplet}/${loader}`, libs: `/usr/lib/${triplet}` };
}
