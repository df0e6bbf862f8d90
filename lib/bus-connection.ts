/**
 * How a process joins the NATS bus: connection options (servers, credentials, TLS, a private
 * inbox prefix), its node id and whether subjects are sender-bound. Sender binding is on exactly
 * when the bus is authenticated: only then do NATS permissions make a subject's sender tokens
 * mean anything (lib/bus-subjects.ts). Pure functions take their inputs; `busSetup` reads the platform settings.
 */
import fs from "fs";
import os from "os";
import type { ConnectionOptions } from "nats";
import { CORE_ROLE, nodeIDFor } from "./bus-identity";
import { isBusNodeID } from "./bus-subjects";
import type { PlatformSettings } from "./platform-settings";

export type BusSettings = {
  user?: string;
  pass?: string;
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  /** Reply subjects of this connection; permissions let each user read only its own. */
  inboxPrefix?: string;
};

export const isNatsUrl = (url: string | undefined): url is string => Boolean(url && /^(nats|tls):\/\//.test(url.trim()));

/**
 * nats.js options from `nats://` or `tls://` URLs (comma list). Credentials in the URL win over
 * `settings` (`nats://user:pass@host` or `nats://token@host`); `tls://` or any TLS file turns TLS on.
 */
export function natsConnectionOptions(urls: string, settings: BusSettings = {}): ConnectionOptions {
  const parsed = urls.split(",").map((u) => new URL(u.trim()));
  // noAsyncTraces: nats.js otherwise builds an Error (a captured stack) for every request it sends,
  // JetStream's acknowledged publishes included, to name the caller in a timeout's trace: 30 to 50 µs
  // of CPU per publish, two publishes a job (bench/RESULTS.md, bench:scheduler).
  const options: ConnectionOptions = { servers: parsed.map((u) => u.host), noAsyncTraces: true };
  const first = parsed[0];
  if (first.username && first.password) {
    options.user = decodeURIComponent(first.username);
    options.pass = decodeURIComponent(first.password);
  } else if (first.username) {
    options.token = decodeURIComponent(first.username);
  } else if (settings.user) {
    options.user = settings.user;
    options.pass = settings.pass ?? "";
  }
  // Each TLS setting is a file path, or the PEM text itself (e.g. from a ConfigMap value).
  const tls: Record<string, string> = {};
  for (const [file, pem, value] of [
    ["caFile", "ca", settings.caFile],
    ["certFile", "cert", settings.certFile],
    ["keyFile", "key", settings.keyFile],
  ] as const)
    if (value) tls[value.trimStart().startsWith("-----BEGIN") ? pem : file] = value;
  if (parsed.some((u) => u.protocol === "tls:") || Object.keys(tls).length) options.tls = tls as ConnectionOptions["tls"];
  if (settings.inboxPrefix) options.inboxPrefix = settings.inboxPrefix;
  return options;
}

export const hasCredentials = (options: ConnectionOptions): boolean => Boolean(options.user || options.token || options.authenticator);

/** The role a process plays on the bus: its one service, or "core" for several. */
export function processRole(services: readonly string[], allServices: readonly string[]): string {
  const list = services.length ? services : allServices;
  return list.length === 1 ? list[0] : CORE_ROLE;
}

export type NodeIdInputs = {
  role: string;
  senderBound: boolean;
  explicit?: string;
  gpuNodeName?: string;
  natsUser?: string;
  host: string;
  pid: number;
};

/**
 * `<role>.<instance>`. A gpu-node's instance is its name (GPU_NODE_NAME, else the `gpu-node.<name>`
 * NATS user it was given), so its id is the one its credential may publish under.
 */
export function processNodeID(i: NodeIdInputs): string {
  if (i.explicit) {
    if (isBusNodeID(i.explicit) || !i.senderBound) return i.explicit;
    return nodeIDFor(i.role, i.explicit);
  }
  if (i.role === "gpu-node") {
    const fromUser = i.natsUser?.startsWith("gpu-node.") ? i.natsUser.slice("gpu-node.".length) : undefined;
    const name = i.gpuNodeName || fromUser;
    if (name) return nodeIDFor("gpu-node", name);
  }
  return nodeIDFor(i.role, `${i.host}-${i.pid}`);
}

export type BusSetup = {
  /** Undefined: no NATS (in-process bus, or another transporter URL). */
  connection?: ConnectionOptions;
  nodeID: string;
  role: string;
  senderBound: boolean;
};

/** NATS_USER, the password (NATS_PASSWORD or NATS_PASSWORD_FILE) and TLS settings from configuration. */
export function busSettings(settings: PlatformSettings): BusSettings {
  const file = settings.natsPasswordFile;
  return {
    user: settings.natsUser,
    pass: settings.natsPassword ?? (file ? fs.readFileSync(file, "utf8").trim() : undefined),
    caFile: settings.natsTlsCa,
    certFile: settings.natsTlsCert,
    keyFile: settings.natsTlsKey,
  };
}

/** Where the process connects and as whom, from configuration; refuses an open bus in production. */
export function busSetup(services: readonly string[], allServices: readonly string[], platform: PlatformSettings): BusSetup {
  const url = platform.transporter;
  const role = processRole(services, allServices);
  const settings = busSettings(platform);
  const base = isNatsUrl(url) ? natsConnectionOptions(url, settings) : undefined;
  const senderBound = Boolean(base && hasCredentials(base));
  if (base && !senderBound && platform.production)
    throw new Error(
      "TRANSPORTER is a NATS server without credentials: NODE_ENV=production refuses an open bus. " +
        "Set NATS_USER and NATS_PASSWORD (npm run bus:config generates a server configuration and credentials).",
    );
  if (senderBound && role === CORE_ROLE && (services.length ? services : allServices).includes("gpu-node"))
    throw new Error("gpu-node must run in its own process on an authenticated bus (SERVICES=gpu-node): it has its own credential");
  const user = base?.user;
  const nodeID = processNodeID({
    role,
    senderBound,
    explicit: platform.nodeId,
    gpuNodeName: platform.gpuNodeName,
    natsUser: user,
    host: os.hostname(),
    pid: process.pid,
  });
  if (senderBound && !isBusNodeID(nodeID)) throw new Error(`NODE_ID "${nodeID}" must be <role>.<instance> ([A-Za-z0-9_-] each) on an authenticated bus`);
  const connection = base && senderBound ? { ...base, inboxPrefix: `_INBOX.${nodeID}` } : base;
  return { connection, nodeID, role, senderBound };
}
