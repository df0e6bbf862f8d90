import type { ServiceSchema } from "moleculer";
import { callersOf, callerTable, roleOfNodeID, senderMayCall, SERVICE_ROLES } from "../../lib/bus-identity";
import { platformCallerTable, SERVICE_REGISTRY } from "../../moleculer.config";

describe("auth - node roles", () => {
  const cases: Array<[string, string | undefined]> = [
    ["api-gateway.host-1234", "api-gateway"],
    ["gpu-node.rack7_a", "gpu-node"],
    ["core.box-1", "core"],
    ["myhost-1234", undefined], // development ids: no role
    ["auth.example.com-12", undefined], // a dotted hostname is not role form
    ["rogue.x", undefined],
    [".x", undefined],
    ["auth.", undefined],
  ];
  it.each(cases)("%s → %s", (nodeID, role) => expect(roleOfNodeID(nodeID)).toBe(role));
});

describe("auth - who may call", () => {
  it("auth - REST actions default to the gateway, internal ones to no remote caller", () => {
    expect(callersOf({ rest: "GET /x" } as never)).toEqual(["api-gateway"]);
    expect(callersOf({} as never)).toEqual([]);
    expect(callersOf({ callers: ["metrics"], rest: "GET /x" } as never)).toEqual(["metrics"]);
  });
  const cases: Array<[string, string[], boolean]> = [
    ["gpu-node.n1", ["gpu-scheduler"], false],
    ["gpu-scheduler.s1", ["gpu-scheduler"], true],
    ["inference.i1", ["api-gateway"], false],
    ["core.c1", ["api-gateway"], true],
    ["core.c1", ["gpu-scheduler"], true],
    ["core.c1", [], false],
    ["gpu-node.n1", [], false],
    ["devhost-99", [], true], // unauthenticated bus: sender unknowable, the caller token still guards accounts
  ];
  it.each(cases)("%s calling an action for %j: %s", (sender, callers, allowed) => expect(senderMayCall(sender, callers)).toBe(allowed));

  it("auth - the table lists each action with its callers, private ones left out", () => {
    const svc: ServiceSchema = {
      name: "svc",
      mixins: [{ name: "m", actions: { fromMixin: { visibility: "public", handler: () => 1 }, hidden: { visibility: "private", handler: () => 1 } } }],
      actions: { open: { rest: "GET /", handler: () => 1 }, inner: { callers: ["metrics"], handler: () => 1 } as never },
    };
    expect(callerTable([svc])).toEqual([
      { action: "svc.fromMixin", callers: [], rest: false },
      { action: "svc.inner", callers: ["metrics"], rest: false },
      { action: "svc.open", callers: ["api-gateway"], rest: true },
    ]);
  });
});

describe("auth - the platform's table", () => {
  const table = new Map(platformCallerTable().map((r) => [r.action, r.callers]));

  it("auth - only the scheduler may drive gpu-nodes, only the gateway may resolve credentials", () => {
    for (const a of ["gpu-node.run", "gpu-node.cancel", "gpu-node.logs"]) expect(table.get(a)).toEqual(["gpu-scheduler"]);
    for (const a of ["auth.resolveApiKey", "auth.resolveAccount", "inference.abort", "gpu-scheduler.logsPage"]) expect(table.get(a)).toEqual(["api-gateway"]);
    for (const a of ["gpu-scheduler.stats", "dbaas.stats"]) expect(table.get(a)).toEqual(["metrics"]);
    for (const a of ["dbaas.reconcile", "dbaas.checkQuota", "dbaas.setMaxStorage"]) expect(table.get(a)).toEqual([]);
  });

  it("auth - every internal action of a platform service declares its callers", () => {
    const undeclared = Object.entries(SERVICE_REGISTRY)
      .filter(([name]) => name !== "api-gateway") // moleculer-web's own actions: not on the bus for anyone
      .flatMap(([, load]) => Object.entries(load().actions ?? {}).map(([name, def]) => [`${load().name}.${name}`, def] as const))
      .filter(([, def]) => typeof def === "object" && !(def as { rest?: unknown }).rest && (def as { visibility?: string }).visibility !== "private")
      .filter(([, def]) => !Array.isArray((def as { callers?: unknown }).callers))
      .map(([name]) => name);
    expect(undeclared).toEqual([]);
  });

  it("auth - every service folder has a bus role (SERVICE_ROLES types each action's callers, so it is listed, not derived)", () => {
    expect([...SERVICE_ROLES].sort()).toEqual(Object.keys(SERVICE_REGISTRY).sort());
  });
});
