import { serviceOwning } from "../../lib/service-routes";
import { platformRestBases, SERVICE_REGISTRY } from "../../moleculer.config";

const REST_BASES = platformRestBases(); // what the composition root hands the gateway

describe("gateway - which service owns a path", () => {
  it("gateway - the table matches every routed service's settings.rest", () => {
    const routed = Object.entries(SERVICE_REGISTRY)
      .map(([name, load]) => [load().settings?.rest, name] as const)
      .filter(([base, name]) => typeof base === "string" && name !== "api-gateway");
    // Plus the second bases of actions' rest objects (`basePath`).
    expect([...REST_BASES].sort()).toEqual([...routed, ["/quotas", "usage"]].sort());
  });

  const cases: Array<[string, string | undefined]> = [
    ["/api/gpu/jobs", "gpu-scheduler"],
    ["/api/gpu", "gpu-scheduler"],
    ["/api/models/infer", "inference"],
    ["/api/databases/1234", "dbaas"],
    ["/api/auth/login", "auth"],
    ["/api/usage", "usage"],
    ["/api/quotas", "usage"],
    ["/api/gpus", undefined],
    ["/api/nothing", undefined],
    ["/gpu/jobs", undefined],
  ];
  it.each(cases)("%s", (path, owner) => expect(serviceOwning(path, REST_BASES)).toBe(owner));
});
