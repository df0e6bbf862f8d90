/**
 * Generates what an authenticated bus needs (the I/O around the pure lib/bus-*.ts modules):
 * the nats-server configuration, a password per user, and optionally a CA with a server
 * certificate (openssl). Used by `npm run bus:config` (deploy/nats/generate.ts) and by the tests.
 */
import { execFileSync } from "child_process";
import { randomBytes } from "crypto";
import fs from "fs";
import path from "path";
import { BusTables, busPermissions, GPU_NODE_NAME } from "./bus-permissions";
import { passwordVariable, renderServerConfig, ServerTls } from "./bus-server-config";

/** The bus tables (the services' callers, events and channels: `platformBusTables()`), and the server's settings. */
export type BusGenerateOptions = BusTables & {
  namespace?: string;
  gpuNodes: string[];
  listen?: string;
  httpPort?: number;
  storeDir: string;
  syncAlways?: boolean;
  maxPayload?: string;
  tls?: ServerTls;
  /** Write literal passwords into the configuration (tests) instead of `$NATS_PASSWORD_<USER>` references. */
  literalPasswords?: boolean;
};

export type GeneratedBus = {
  config: string;
  /** user → password */
  passwords: Record<string, string>;
  /** NATS_PASSWORD_<USER>=… lines for an env file. */
  env: Record<string, string>;
};

/**
 * nats-server parses a `$VAR`'s value as a configuration value: a hex password that starts with a
 * digit can read as a number (`1234`, `0e7f3a` refuse to start the server; `123e4` would be a
 * float), so every password starts with a letter.
 */
export const newPassword = () => `p${randomBytes(24).toString("hex")}`;

export function generateBus(o: BusGenerateOptions): GeneratedBus {
  for (const name of o.gpuNodes)
    if (!GPU_NODE_NAME.test(name)) throw new Error(`gpu-node name "${name}" must match ${GPU_NODE_NAME} (it becomes a NATS subject token)`);
  const permissions = busPermissions({ namespace: o.namespace ?? "", callers: o.callers, events: o.events, channels: o.channels }, o.gpuNodes);
  const passwords: Record<string, string> = {};
  const env: Record<string, string> = {};
  const users = Object.entries(permissions).map(([user, perms]) => {
    passwords[user] = newPassword();
    env[passwordVariable(user)] = passwords[user];
    return { user, password: o.literalPasswords ? passwords[user] : { env: passwordVariable(user) }, permissions: perms };
  });
  const config = renderServerConfig({
    listen: o.listen ?? "0.0.0.0:4222",
    httpPort: o.httpPort,
    serverName: "ci-platform-nats",
    storeDir: o.storeDir,
    syncAlways: o.syncAlways,
    maxPayload: o.maxPayload,
    tls: o.tls,
    users,
  });
  return { config, passwords, env };
}

export type Certificates = { caFile: string; certFile: string; keyFile: string };

/** A fresh CA and a server certificate for `names` (DNS names or IP addresses), with openssl. */
export function makeCertificates(dir: string, names: string[], days = 825): Certificates {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const f = (name: string) => path.join(dir, name);
  const run = (...args: string[]) => execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
  run(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    f("ca-key.pem"),
    "-out",
    f("ca.pem"),
    "-days",
    String(days),
    "-subj",
    "/CN=ci-platform NATS CA",
  );
  const san = names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(",");
  fs.writeFileSync(f("server.ext"), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
  run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f("server-key.pem"), "-out", f("server.csr"), "-subj", `/CN=${names[0]}`);
  run(
    "x509",
    "-req",
    "-in",
    f("server.csr"),
    "-CA",
    f("ca.pem"),
    "-CAkey",
    f("ca-key.pem"),
    "-CAcreateserial",
    "-out",
    f("server.pem"),
    "-days",
    String(days),
    "-extfile",
    f("server.ext"),
  );
  for (const file of ["server.csr", "server.ext", "ca.srl"]) fs.rmSync(f(file), { force: true });
  fs.chmodSync(f("server-key.pem"), 0o600);
  fs.chmodSync(f("ca-key.pem"), 0o600);
  return { caFile: f("ca.pem"), certFile: f("server.pem"), keyFile: f("server-key.pem") };
}

/** Sets `NAME=value` lines in an env file: missing ones are added, CHANGE-ME placeholders replaced, real values kept (unless `rotate`). */
export function updateEnvFile(file: string, values: Record<string, string>, rotate = false): string[] {
  const lines = fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n") : [];
  const written: string[] = [];
  for (const [name, value] of Object.entries(values)) {
    const at = lines.findIndex((l) => l.startsWith(`${name}=`));
    if (at < 0) lines.splice(lines.length && lines[lines.length - 1] === "" ? lines.length - 1 : lines.length, 0, `${name}=${value}`);
    else if (rotate || lines[at].includes("CHANGE-ME") || lines[at] === `${name}=`) lines[at] = `${name}=${value}`;
    else continue;
    written.push(name);
  }
  fs.writeFileSync(file, lines.join("\n").replace(/\n*$/, "\n"), { mode: 0o600 });
  return written;
}

/** Replaces the `nats-server.conf: |` block of a Kubernetes ConfigMap manifest with `conf`. */
export function embedInConfigMap(manifest: string, conf: string): string {
  const start = manifest.indexOf("  nats-server.conf: |\n");
  if (start < 0) throw new Error("no `nats-server.conf: |` block in the manifest");
  const body = start + "  nats-server.conf: |\n".length;
  const end = manifest.indexOf("\n---", body);
  const indented = conf
    .trimEnd()
    .split("\n")
    .map((l) => (l ? `    ${l}` : ""))
    .join("\n");
  return manifest.slice(0, body) + indented + (end < 0 ? "\n" : manifest.slice(end));
}
