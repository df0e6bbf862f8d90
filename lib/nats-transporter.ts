/**
 * Moleculer's NATS transporter, with:
 * - batching: packets sent during one event-loop turn are written to the socket together.
 *   nats.js flushes its buffer at the end of each microtask run, i.e. once per incoming HTTP
 *   request or NATS message under load; deferring publishes to setImmediate lets every request
 *   handled in the same turn share one write. Order is kept (one queue, emptied before disconnect).
 * - sender binding (authenticated bus): every subject ends with this node's id, subscriptions
 *   take any sender (`.*.*`), and a packet whose payload `sender` differs from its subject's is
 *   dropped (lib/bus-subjects.ts). NATS permissions decide who may publish under which id.
 * - robustness: a packet over the server's max_payload is refused before publishing (a caller
 *   gets a clean 413; a too-large answer becomes an error answer), publish failures are logged,
 *   never thrown from setImmediate, and malformed or forged packets (e.g. an INFO with this
 *   node's id, which makes Moleculer stop the process) are dropped with a rate-limited warning.
 * - budgets (authenticated bus): a gpu-node sending more than its per-second budget of a packet
 *   kind (lib/bus-budget.ts) has the excess dropped unread and counted, and an INFO keeps only
 *   the services its sender's role may run (`senderMayHost`), so a node cannot draw core calls.
 * - streams: a stream whose packets arrive with a gap (one dropped over budget, or lost) fails at
 *   once with an error instead of waiting for the lost packet until its timeout, the rest of a
 *   request stream no handler reads any more (it rejected) is dropped, and a request stream no
 *   handler took cannot crash the process when its sender leaves (lib/bus-streams.ts).
 */
import { Errors, ServiceBroker, Transporters } from "moleculer";
import type { ConnectionOptions, Msg, NatsConnection, NatsError, Subscription } from "nats";
import { budgetOf, TokenBuckets } from "./bus-budget";
import { roleOfNodeID, senderMayHost } from "./bus-identity";
import { incrementCounter } from "./metrics";
import { anySender, OWN_ECHO, rejectPacket, senderOfSubject, withSender } from "./bus-subjects";
import { RateLimitedLog } from "./rate-limited-log";
import { BusStreams, type StreamTransit } from "./bus-streams";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a Moleculer seam: its transit builds packet payloads untyped; fields are read by name
type Packet = { type: string; target?: string | null; payload: Record<string, any> };
type SendMeta = { packet?: Packet };
type Logger = { warn(...args: unknown[]): void; error(...args: unknown[]): void };

/** Base-class members this subclass uses (moleculer's typings do not declare them). */
type NatsInternals = {
  client: NatsConnection | null;
  prefix: string;
  nodeID: string;
  logger: Logger;
  subscriptions: Subscription[];
  messageHandler(cmd: string, packet: Packet): unknown;
  serialize(packet: Packet): Buffer;
  deserialize(cmd: string, data: Buffer): Packet;
  broker: ServiceBroker & {
    serializer: { serialize(payload: unknown, type: string): Buffer };
    registry: { getActionEndpoints(action: string): { hasLocal(): boolean } | null | undefined };
  };
  transit?: StreamTransit & { removePendingRequest(id: string): void; instanceID: string };
};

export type BusTransporterOptions = ConnectionOptions & {
  /** Subjects carry the sender's node id (needs `<role>.<instance>` node ids and a permissioned server). */
  senderBound?: boolean;
};

export class BusTransporter extends Transporters.NATS {
  private pending: Array<[string, Buffer]> = [];
  private readonly senderBound: boolean;
  get isSenderBound(): boolean {
    return this.senderBound;
  }
  /** The subject each received buffer came on (the receive hook only passes the buffer on). */
  private readonly subjects = new WeakMap<Buffer, string>();
  private warnings?: RateLimitedLog;
  private readonly budgets = new TokenBuckets();
  private readonly streams = new BusStreams();
  /** Whether this process runs `action`. */
  private readonly runsAction = (action: string) => Boolean(this.self.broker.registry.getActionEndpoints(action)?.hasLocal());

  constructor(options: BusTransporterOptions) {
    const { senderBound, ...connection } = options;
    super(connection as never);
    this.senderBound = Boolean(senderBound);
  }

  private get self(): NatsInternals {
    return this as unknown as NatsInternals;
  }

  private warn(kind: string, message: string): void {
    this.warnings ??= new RateLimitedLog((m) => this.self.logger.warn(m));
    this.warnings.note(kind, message);
  }

  override connect(): Promise<unknown> {
    return super.connect().then((result) => {
      void this.reportViolations();
      return result;
    });
  }

  /** The server refuses what a credential may not do without closing the connection: say so. */
  private async reportViolations(): Promise<void> {
    const client = this.self.client;
    if (!client) return;
    for await (const s of client.status()) {
      const ctx = (s as { permissionContext?: { operation: string; subject: string } }).permissionContext;
      if (s.type === "error" && ctx)
        this.warn(`denied-${ctx.operation}`, `NATS refused ${ctx.operation} on ${ctx.subject}: this credential's permissions do not allow it`);
    }
  }

  // ---- publishing ----

  override publish(packet: Packet): Promise<void> {
    const self = this.self;
    let topic = self.prefix + "." + packet.type + (packet.target ? "." + packet.target : "");
    // Calls and events to one node name the action or event, so permissions can allow each one.
    if (this.senderBound && packet.target && packet.type === "REQ") topic += "." + packet.payload.action;
    if (this.senderBound && packet.target && packet.type === "EVENT") topic += "." + packet.payload.event;
    return this.sendBound(topic, self.serialize(packet), packet);
  }

  override publishBalancedEvent(packet: Packet, group: string): Promise<void> {
    const topic = `${this.self.prefix}.EVENTB.${group}.${packet.payload.event}`;
    return this.sendBound(topic, this.self.serialize(packet), packet);
  }

  override publishBalancedRequest(packet: Packet): Promise<void> {
    const topic = `${this.self.prefix}.REQB.${packet.payload.action}`;
    return this.sendBound(topic, this.self.serialize(packet), packet);
  }

  private sendBound(topic: string, data: Buffer, packet: Packet): Promise<void> {
    const subject = this.senderBound ? withSender(topic, this.self.nodeID) : topic;
    // `send` is what Moleculer's transporterSend hooks wrap (metrics count bytes there).
    return (this as unknown as { send(t: string, d: Buffer, m: SendMeta): Promise<void> }).send(subject, data, { packet });
  }

  override send(topic: string, data: Buffer, meta?: SendMeta): Promise<void> {
    const limit = this.self.client?.info?.max_payload;
    if (limit && data.length > limit) return this.refuseOversized(topic, data.length, limit, meta?.packet);
    if (this.pending.length === 0) setImmediate(() => this.flushPending());
    this.pending.push([topic, data]);
    return Promise.resolve();
  }

  /** An answer too large becomes an error answer (the caller gets it at once); anything else is refused. */
  private refuseOversized(topic: string, size: number, limit: number, packet?: Packet): Promise<void> {
    const what = packet ? `${packet.type} packet${packet.payload.action ? ` for ${packet.payload.action}` : ""}` : "packet";
    this.warn(`oversized-${packet?.type}`, `Refused a ${size}-byte ${what}: the NATS server's max_payload is ${limit} bytes`);
    if (packet?.type === "RES") {
      const answer = {
        ...packet.payload,
        success: false,
        data: null,
        meta: {},
        stream: false,
        error: {
          name: "MoleculerClientError",
          message: `The answer is too large to send (${size} bytes; the bus allows ${limit})`,
          code: 413,
          type: "PAYLOAD_TOO_LARGE",
          data: { size, limit },
          nodeID: this.self.nodeID,
        },
      };
      return this.send(topic, this.self.broker.serializer.serialize(answer, "RES"));
    }
    // A refused request would otherwise wait in transit's pending list until its timeout.
    if (packet?.type === "REQ" && typeof packet.payload.id === "string") this.self.transit?.removePendingRequest(packet.payload.id);
    return Promise.reject(
      new Errors.MoleculerClientError(`Message too large for the bus (${size} bytes; the limit is ${limit})`, 413, "PAYLOAD_TOO_LARGE", { size, limit }),
    );
  }

  override disconnect(): Promise<unknown> {
    this.flushPending();
    return super.disconnect();
  }

  private flushPending(): void {
    const batch = this.pending;
    this.pending = [];
    const client = this.self.client;
    if (!client) return; // like the stock send(): nothing to send on without a connection
    for (const [topic, data] of batch) {
      try {
        client.publish(topic, data);
      } catch (err) {
        // Closed or draining connection, or a limit the server lowered: the packet is lost, the process stays up.
        this.warn(`publish-${(err as NatsError).code}`, `NATS publish to ${topic} failed: ${(err as Error).message}`);
      }
    }
  }

  // ---- subscribing and receiving ----

  override subscribe(cmd: string, nodeID?: string): Promise<void> {
    const self = this.self;
    const topic = self.prefix + "." + cmd + (nodeID ? "." + nodeID : "");
    const named = nodeID && (cmd === "REQ" || cmd === "EVENT"); // `.<action or event>.<sender>`
    this.listen(!this.senderBound ? topic : named ? `${topic}.>` : anySender(topic), cmd);
    return Promise.resolve();
  }

  override subscribeBalancedRequest(action: string): Promise<void> {
    // Moleculer's own `$node.*` actions are never called over an authenticated bus (no permission covers them).
    if (this.senderBound && action.startsWith("$")) return Promise.resolve();
    const topic = `${this.self.prefix}.REQB.${action}`;
    this.self.subscriptions.push(this.listen(this.senderBound ? anySender(topic) : topic, "REQ", action));
    return Promise.resolve();
  }

  override subscribeBalancedEvent(event: string, group: string): Promise<void> {
    const topic = `${this.self.prefix}.EVENTB.${group}.${event}`.replace(/\*\*.*$/g, ">");
    this.self.subscriptions.push(this.listen(this.senderBound ? anySender(topic) : topic, "EVENT", group));
    return Promise.resolve();
  }

  private listen(subject: string, cmd: string, queue?: string): Subscription {
    const client = this.self.client!;
    return client.subscribe(subject, {
      ...(queue ? { queue } : {}),
      callback: (err: NatsError | null, msg: Msg) => {
        if (err) return this.warn(`subscription-${subject}`, `NATS subscription ${subject} failed: ${err.message}`);
        if (this.senderBound && this.overBudget(cmd, msg.subject)) return;
        const data = Buffer.from(msg.data);
        if (this.senderBound) this.subjects.set(data, msg.subject);
        try {
          (this as unknown as { receive(cmd: string, data: Buffer): unknown }).receive(cmd, data);
        } catch (e) {
          this.warn("receive", `Dropped a ${cmd} packet that failed to process: ${(e as Error).message}`);
        }
      },
    });
  }

  /** Whether the packet's sender went over its budget for this kind (checked before the packet is even copied). */
  private overBudget(cmd: string, subject: string): boolean {
    const sender = senderOfSubject(subject);
    const budget = sender === undefined ? undefined : budgetOf(roleOfNodeID(sender), cmd);
    if (!budget || this.budgets.take(`${cmd} ${sender}`, budget, Date.now())) return false;
    incrementCounter(this.self.broker, "busDropped", { sender: sender!, kind: cmd });
    this.warn(`budget-${cmd}-${sender}`, `Dropped ${cmd} packets from ${sender}: over its budget of ${budget.perSecond}/s`);
    return true;
  }

  /** Keeps only the services an INFO's sender may run; the rest never reach the registry. */
  private keepOwnServices(payload: Record<string, unknown>): void {
    const sender = payload.sender as string;
    const services = payload.services as Array<{ name?: unknown }>;
    const kept = services.filter((s) => typeof s?.name === "string" && senderMayHost(sender, s.name));
    if (kept.length === services.length) return;
    const dropped = services.filter((s) => !kept.includes(s)).map((s) => String(s?.name).slice(0, 100));
    this.warn(`services-${sender}`, `Ignored services ${dropped.join(", ")} offered by ${sender}: its role may not run them`);
    payload.services = kept;
  }

  override incomingMessage(cmd: string, msg: Buffer): Promise<void> {
    if (!msg) return Promise.resolve();
    const self = this.self;
    let packet: Packet;
    try {
      packet = self.deserialize(cmd, msg);
    } catch (err) {
      this.warn(`malformed-${cmd}`, `Dropped a ${cmd} packet that is not valid: ${(err as Error).message}`);
      return Promise.resolve();
    }
    const subject = this.subjects.get(msg);
    const subjectSender = subject ? senderOfSubject(subject) : undefined;
    const reason = rejectPacket(cmd, packet.payload, self.nodeID, subjectSender, this.senderBound);
    if (reason === OWN_ECHO) {
      // Its own broadcasts come back (NATS echoes them): quiet. Another process's INFO with this id is not.
      if (cmd === "INFO" && packet.payload.instanceID !== self.transit?.instanceID)
        this.warn("drop-INFO-own-id", `Dropped an INFO packet${subject ? ` on ${subject}` : ""} from another process using this node's id ${self.nodeID}`);
      return Promise.resolve();
    }
    if (reason) {
      this.warn(`drop-${cmd}`, `Dropped a ${cmd} packet${subject ? ` on ${subject}` : ""}: ${reason}`);
      return Promise.resolve();
    }
    if (cmd === "INFO" && this.senderBound) this.keepOwnServices(packet.payload);
    if ((cmd === "RES" || cmd === "REQ") && packet.payload.stream != null) {
      const verdict = this.streams.admit(cmd, packet.payload, self.transit);
      if (verdict === "drop") return Promise.resolve();
      if (verdict === "gap") this.warn(`stream-gap-${cmd}`, `Failed a ${cmd} stream from ${packet.payload.sender}: packets of it were lost`);
    }
    const handled = self.messageHandler(cmd, packet) as Promise<void>;
    if (cmd === "REQ" && packet.payload.stream === true) this.streams.handled(packet.payload, self.transit, this.runsAction);
    return handled;
  }
}

/** Whether the broker is on an authenticated, sender-bound bus. */
export function onAuthenticatedBus(broker: { transit?: { tx?: unknown } }): boolean {
  const tx = broker.transit?.tx;
  return tx instanceof BusTransporter && tx.isSenderBound;
}
