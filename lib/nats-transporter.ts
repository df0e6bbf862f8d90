/**
 * Moleculer's NATS transporter, with the packets sent during one event-loop turn written to the
 * socket together. nats.js flushes its buffer at the end of each microtask run, i.e. once per
 * incoming HTTP request or NATS message under load: one write (and one wake-up of the NATS
 * server and of the receiving process) per packet. Deferring the publishes to setImmediate lets
 * every request handled in the same turn share one write. Order is kept: every packet goes
 * through the same queue, and the queue is emptied before disconnecting.
 */
import { Transporters } from "moleculer";

type NatsClient = { publish(topic: string, data: Buffer): void };

export class BatchingNatsTransporter extends Transporters.NATS {
  private pending: Array<[string, Buffer]> = [];

  override send(topic: string, data: Buffer): Promise<void> {
    if (this.pending.length === 0) setImmediate(() => this.flushPending());
    this.pending.push([topic, data]);
    return Promise.resolve();
  }

  override disconnect(): Promise<unknown> {
    this.flushPending();
    return super.disconnect();
  }

  private flushPending(): void {
    const batch = this.pending;
    this.pending = [];
    const client = (this as unknown as { client: NatsClient | null }).client;
    if (!client) return; // like the stock send(): nothing to send on without a connection
    for (const [topic, data] of batch) client.publish(topic, data);
  }
}

/** The broker's `transporter` option: NATS URLs get the batching transporter, others stay as given. */
export function transporterOption(url: string | undefined): string | BatchingNatsTransporter | undefined {
  return url?.startsWith("nats://") ? new BatchingNatsTransporter({ url }) : url;
}
