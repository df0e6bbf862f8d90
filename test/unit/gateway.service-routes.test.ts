import type { ServiceSchema } from "moleculer";
import { restBasesOf, serviceOwning } from "../../lib/service-routes";
import { platformRestBases, SERVICE_REGISTRY } from "../../moleculer.config";

const REST_BASES = platformRestBases(); // what the composition root hands the gateway

describe("gateway - which service owns a path", () => {
  it("gateway - the table holds every routed service's settings.rest, and dbaas's second base /snapshots", () => {
    const routed = Object.entries(SERVICE_REGISTRY)
      .map(([name, load]) => [load().settings?.rest, name] as const)
      .filter(([base, name]) => typeof base === "string" && name !== "api-gateway");
    expect([...REST_BASES].sort()).toEqual([...routed, ["/quotas", "usage"], ["/snapshots", "dbaas"], ["/webhooks", "gpu-scheduler"]].sort());
  });

  it("gateway - bases come from settings.rest (a base or a list) and from the basePath of action routes, once each", () => {
    const schemas: Array<[string, ServiceSchema]> = [
      ["a", { name: "a", settings: { rest: ["/one", "/two"] }, actions: { x: { rest: "GET /" } } }],
      [
        "b",
        {
          name: "b",
          settings: { rest: "/three" },
          actions: { y: { rest: { method: "GET", basePath: "/four", path: "/" } }, z: { rest: [{ basePath: "/four" }] } },
        },
      ],
      ["api-gateway", { name: "api-gateway", settings: { rest: "/gw" } }],
    ];
    expect(restBasesOf(schemas)).toEqual([
      ["/one", "a"],
      ["/two", "a"],
      ["/three", "b"],
      ["/four", "b"],
    ]);
  });

  const cases: Array<[string, string | undefined]> = [
    ["/api/gpu/jobs", "gpu-scheduler"],
    ["/api/gpu", "gpu-scheduler"],
    ["/api/gpu/status", "gpu-scheduler"],
    // A base under another's: the longest one holding the path owns it.
    ["/api/gpu/status/history", "metrics"],
    ["/api/gpu/status/historyx", "gpu-scheduler"],
    ["/api/models/infer", "inference"],
    ["/api/databases/1234", "dbaas"],
    ["/api/snapshots", "dbaas"],
    ["/api/snapshots/1234", "dbaas"],
    ["/api/snapshotsx", undefined],
    ["/api/auth/login", "auth"],
    ["/api/usage", "usage"],
    ["/api/quotas", "usage"],
    ["/api/gpus", undefined],
    ["/api/nothing", undefined],
    ["/gpu/jobs", undefined],
  ];
  it.each(cases)("%s", (path, owner) => expect(serviceOwning(path, REST_BASES)).toBe(owner));
});
