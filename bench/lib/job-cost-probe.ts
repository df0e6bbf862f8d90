/**
 * Preloaded by the benches into the platform's processes (`node --import tsx --import <this>`),
 * active only with BENCH_JOB_COST_DIR set: counts SQL round trips and statements (pg's
 * Client#query, which Pool#query goes through) and NATS messages published and delivered
 * (nats.js's protocol handler, under Moleculer's transporter and JetStream alike), and answers
 * the counts as one JSON line to whoever connects to <dir>/<pid>.sock. Production code never loads
 * it: the counting costs nothing outside a bench. With BENCH_JOB_COST_TEXTS=1 it also counts each
 * statement text and writes the counts to <dir>/<pid>.statements.json at every answer (which
 * statements a job costs, for a profile).
 */
import { rmSync, writeFileSync } from "fs";
import net from "net";
import { ProtocolHandler } from "nats/lib/nats-base-client/protocol";
import path from "path";
import { Client } from "pg";
import { busKind, noCounts, statementsIn } from "./job-cost";

const dir = process.env.BENCH_JOB_COST_DIR;
if (dir) install(dir);

function install(dir: string): void {
  const counts = noCounts();
  const texts = process.env.BENCH_JOB_COST_TEXTS === "1" ? new Map<string, number>() : undefined;
  const count = (into: Record<string, number>, subject: string) => {
    const kind = busKind(subject);
    into[kind] = (into[kind] ?? 0) + 1;
  };

  type Query = (this: Client, config: unknown, values?: unknown, callback?: unknown) => unknown;
  const query = Client.prototype.query as unknown as Query;
  (Client.prototype as unknown as { query: Query }).query = function (this: Client, config, values, callback) {
    counts.roundTrips++;
    const text = typeof config === "string" ? config : (config as { text?: unknown } | null)?.text;
    const params = Array.isArray(values) ? values : (config as { values?: unknown[] } | null)?.values;
    // With parameters it is the extended protocol: one statement. A cursor or other submittable: one.
    counts.statements += typeof text === "string" && !params?.length ? statementsIn(text) : 1;
    if (texts && typeof text === "string") texts.set(text, (texts.get(text) ?? 0) + 1);
    return query.call(this, config, values, callback);
  };

  const proto = ProtocolHandler.prototype;
  const publish = proto.publish;
  proto.publish = function (this: ProtocolHandler, subject, payload, options) {
    count(counts.published, subject);
    return publish.call(this, subject, payload, options);
  };
  const processMsg = proto.processMsg;
  const decoder = new TextDecoder();
  proto.processMsg = function (this: ProtocolHandler, msg, data) {
    count(counts.delivered, decoder.decode(msg.subject));
    return processMsg.call(this, msg, data);
  };

  const socket = path.join(dir, `${process.pid}.sock`);
  const server = net.createServer((conn) => {
    if (texts)
      writeFileSync(
        path.join(dir, `${process.pid}.statements.json`),
        JSON.stringify(
          [...texts].sort((a, b) => b[1] - a[1]),
          null,
          1,
        ),
      );
    conn.end(`${JSON.stringify(counts)}\n`);
  });
  server.listen(socket);
  server.unref();
  process.once("exit", () => rmSync(socket, { force: true }));
}
