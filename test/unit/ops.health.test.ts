/** Readiness decisions of lib/health.ts, on an in-process broker (no servers). */
import { ServiceBroker } from "moleculer";
import { addReadinessCheck, evaluateReadiness, markDraining, ReadinessCheck } from "../../lib/health";

type Case = {
  name: string;
  checks?: Record<string, ReadinessCheck>;
  dependencies?: string[];
  start?: boolean;
  drain?: boolean;
  ready: boolean;
  failing: Record<string, string | RegExp>;
};

const never: ReadinessCheck = () => new Promise(() => undefined);

const cases: Case[] = [
  { name: "a started broker whose checks answer is ready", checks: { db: async () => 1 }, ready: true, failing: {} },
  {
    name: "a check that rejects makes it unready, naming the check",
    checks: {
      db: async () => {
        throw new Error("connect ECONNREFUSED");
      },
      cache: async () => "PONG",
    },
    ready: false,
    failing: { "svc.db": "connect ECONNREFUSED" },
  },
  { name: "a check that does not answer in time fails", checks: { db: never }, ready: false, failing: { "svc.db": "no answer within 50 ms" } },
  {
    name: "a declared dependency that is not registered fails",
    dependencies: ["elsewhere"],
    ready: false,
    failing: { dependencies: "not available: elsewhere" },
  },
  { name: "a broker not started yet is not ready", start: false, ready: false, failing: { broker: "starting", services: "starting: svc" } },
  { name: "a draining broker is not ready", drain: true, ready: false, failing: { broker: "draining" } },
];

describe("ops - readiness", () => {
  const brokers: ServiceBroker[] = [];
  afterAll(() => Promise.all(brokers.map((b) => b.stop())));

  it.each(cases.map((c) => [c.name, c] as const))("ops - %s", async (_name, c) => {
    const broker = new ServiceBroker({ logger: false, nodeID: `health-${brokers.length}` });
    brokers.push(broker);
    const svc = broker.createService({ name: "svc", dependencies: c.dependencies });
    for (const [name, check] of Object.entries(c.checks ?? {})) addReadinessCheck(svc, name, check);
    // A dependency that never comes would block start(); the case only needs it declared.
    if (c.start !== false && !c.dependencies) await broker.start();
    if (c.dependencies) (broker as unknown as { started: boolean }).started = true;
    if (c.drain) markDraining(broker);

    const result = await evaluateReadiness(broker, 50);
    expect(result.ready).toBe(c.ready);
    const failing = Object.fromEntries(
      Object.entries(result.checks)
        .filter(([, r]) => !r.ok)
        .map(([k, r]) => [k, r.error]),
    );
    expect(Object.keys(failing).sort()).toEqual(Object.keys(c.failing).sort());
    for (const [k, msg] of Object.entries(c.failing)) expect(failing[k]).toMatch(msg);
    expect(result.checks.transporter).toEqual({ ok: true }); // no transporter configured
  });
});
