/**
 * A real nats-server (Debian's /usr/sbin/nats-server) on a free port with the platform's own
 * generated configuration: users per role and per gpu-node, subject permissions, JetStream,
 * optionally TLS with a fresh CA. For the bus security tests and the benchmarks.
 */
import { ChildProcess, spawn } from "child_process";
import fs from "fs";
import net from "net";
import os from "os";
import path from "path";
import { ServiceBroker } from "moleculer";
import { connect, NatsConnection } from "nats";
import { natsConnectionOptions } from "../../lib/bus-connection";
import { BusTransporter } from "../../lib/nats-transporter";
import { platformBusTables } from "../../moleculer.config";
import { Certificates, generateBus, makeCertificates } from "../../lib/bus-setup";
import { freePort } from "./platform";

export const NATS_SERVER = process.env.NATS_SERVER_BIN || "/usr/sbin/nats-server";

export type BusServer = {
  port: number;
  /** nats:// or tls:// URL without credentials. */
  url: string;
  passwords: Record<string, string>;
  /** TRANSPORTER with a user's credentials in it. */
  urlFor(user: string): string;
  certificates?: Certificates;
  dir: string;
  log(): string;
  stop(): Promise<void>;
};

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });
}

export async function startBusServer(opts: { namespace?: string; gpuNodes?: string[]; tls?: boolean; maxPayload?: string } = {}): Promise<BusServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bus-nats-"));
  const port = await freePort();
  const certificates = opts.tls ? makeCertificates(path.join(dir, "tls"), ["localhost", "127.0.0.1"]) : undefined;
  const generated = generateBus({
    namespace: opts.namespace,
    gpuNodes: opts.gpuNodes ?? [],
    ...platformBusTables(),
    listen: `127.0.0.1:${port}`,
    storeDir: path.join(dir, "js"),
    syncAlways: false, // Debian 12's nats-server 2.9 does not know sync_interval
    maxPayload: opts.maxPayload ?? "1MB",
    tls: certificates && { certFile: certificates.certFile, keyFile: certificates.keyFile },
    literalPasswords: true,
  });
  const conf = path.join(dir, "nats-server.conf");
  fs.writeFileSync(conf, generated.config, { mode: 0o600 });
  const proc: ChildProcess = spawn(NATS_SERVER, ["-c", conf], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  proc.stdout!.on("data", (d) => (log += d));
  proc.stderr!.on("data", (d) => (log += d));
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  const deadline = Date.now() + 10_000;
  while (!(await answers(port))) {
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`nats-server did not start:\n${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const scheme = opts.tls ? "tls" : "nats";
  return {
    port,
    url: `${scheme}://127.0.0.1:${port}`,
    passwords: generated.passwords,
    urlFor: (user) => `${scheme}://${encodeURIComponent(user)}:${encodeURIComponent(generated.passwords[user])}@127.0.0.1:${port}`,
    certificates,
    dir,
    log: () => log,
    async stop() {
      if (proc.exitCode === null) proc.kill("SIGTERM");
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A raw NATS client holding `user`'s credential (replies under `nodeID`), recording what the server refused it. */
export async function rawBusClient(server: BusServer, user: string, nodeID: string): Promise<{ nc: NatsConnection; denied: string[] }> {
  const nc = await connect({ ...natsConnectionOptions(server.urlFor(user)), inboxPrefix: `_INBOX.${nodeID}` });
  const denied: string[] = [];
  void (async () => {
    for await (const s of nc.status()) {
      const ctx = (s as { permissionContext?: { operation: string; subject: string } }).permissionContext;
      if (ctx) denied.push(`${ctx.operation} ${ctx.subject}`);
    }
  })();
  return { nc, denied };
}

type ServiceSchema = Parameters<ServiceBroker["createService"]>[0];

/** A broker holding `user`'s credential, publishing as `nodeID` (sender-bound, as the platform's), running `services`; added to `started` before it starts. */
export async function busBroker(
  server: BusServer,
  opts: { namespace: string; user: string; nodeID: string; services?: ServiceSchema[]; requestTimeout: number },
  started: ServiceBroker[],
): Promise<ServiceBroker> {
  const { namespace, user, nodeID, services = [], requestTimeout } = opts;
  const transporter = new BusTransporter({ ...natsConnectionOptions(server.urlFor(user)), inboxPrefix: `_INBOX.${nodeID}`, senderBound: true });
  const broker = new ServiceBroker({ namespace, nodeID, transporter, logger: false, requestTimeout });
  for (const s of services) broker.createService(s);
  started.push(broker);
  await broker.start();
  return broker;
}
