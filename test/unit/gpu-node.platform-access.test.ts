/**
 * Platform access on a node (issue 28), the pure parts: the job's variables from a grant, the
 * relay's destinations from the settings, why a node cannot serve a grant, and the Docker create
 * request with the relay (binds, entrypoint, variables; the grant nowhere but Env).
 */
import { containerSpec } from "../../services/gpu-node/container-spec";
import { CONTAINER_LIBS, CONTAINER_NODE, withRelay } from "../../services/gpu-node/docker-relay";
import { grantProblem, platformEnv, PlatformAccess, relayHost } from "../../services/gpu-node/platform-access";
import type { JobRelay } from "../../services/gpu-node/relay";
import { forwardRoutes, loaderOf, RELAY_MOUNT } from "../../services/gpu-node/relay-forwarder";
import { parseGpuNodeSettings } from "../../services/gpu-node/settings";

const token = `cit_${"x9".repeat(16)}`;
const db = (database: string, user: string, password: string) => ({ database, user, password });

describe("gpu-node platform access", () => {
  test.each([
    ["no databases", [], {}],
    ["one database", [db("client_a", "job_1", "pw")], { CI_DATABASE_URL_0: "postgresql://job_1:pw@127.0.0.1:5432/client_a?sslmode=disable" }],
    [
      "passwords and names are URL-encoded, in grant order",
      [db("d0", "u0", "a/b@c:d?e#f%"), db("d-1", "u.1", "p w")],
      {
        CI_DATABASE_URL_0: "postgresql://u0:a%2Fb%40c%3Ad%3Fe%23f%25@127.0.0.1:5432/d0?sslmode=disable",
        CI_DATABASE_URL_1: "postgresql://u.1:p%20w@127.0.0.1:5432/d-1?sslmode=disable",
      },
    ],
  ])("gpu-node platform access - the job's variables: %s", (_name, databases, urls) => {
    expect(platformEnv({ token, databases })).toEqual({ CI_PLATFORM_URL: "http://127.0.0.1:8080", CI_PLATFORM_TOKEN: token, ...urls });
  });

  test.each([
    ["http://gateway.internal:3000", { host: "gateway.internal", port: 3000, tls: false, path: "" }, "http://127.0.0.1:8080"],
    ["https://ci.example.com/platform/", { host: "ci.example.com", port: 443, tls: true, path: "/platform" }, "http://127.0.0.1:8080/platform"],
    ["http://[::1]", { host: "::1", port: 80, tls: false, path: "" }, "http://127.0.0.1:8080"],
  ])("gpu-node platform access - GPU_RELAY_PLATFORM_URL %s", (url, platform, jobUrl) => {
    const host = relayHost(parseGpuNodeSettings({ GPU_RELAY_PLATFORM_URL: url }).relay);
    expect(host.destinations).toEqual({ platform });
    expect(platformEnv({ token, databases: [] }, host.destinations.platform!.path).CI_PLATFORM_URL).toBe(jobUrl);
  });

  test("gpu-node platform access - settings: defaults, and a bad sslmode or URL stops the node", () => {
    const relay = parseGpuNodeSettings({}).relay;
    expect(relay).toMatchObject({ platformUrl: undefined, databaseHost: undefined, databasePort: 5432, databaseSslMode: "prefer" });
    expect(relayHost(relay).destinations).toEqual({});
    expect(() => parseGpuNodeSettings({ GPU_RELAY_DATABASE_SSLMODE: "verify-ca" })).toThrow(/GPU_RELAY_DATABASE_SSLMODE/);
    expect(() => parseGpuNodeSettings({ GPU_RELAY_PLATFORM_URL: "gateway:3000" })).toThrow(/GPU_RELAY_PLATFORM_URL/);
  });

  const platform = { host: "gw", port: 3000, tls: false, path: "" };
  const database = { host: "pg", port: 5433, sslMode: "prefer" as const };
  test.each([
    ["a node without a relay", undefined, [], /GPU_RELAY_PLATFORM_URL is not set/],
    ["a relay without a platform", { destinations: { database }, dir: "/r" }, [], /GPU_RELAY_PLATFORM_URL is not set/],
    ["databases, but no database server", { destinations: { platform }, dir: "/r" }, [db("d", "u", "secret")], /GPU_RELAY_DATABASE_HOST is not set/],
    ["the platform only", { destinations: { platform }, dir: "/r" }, [], null],
    ["both", { destinations: { platform, database }, dir: "/r" }, [db("d", "u", "secret")], null],
  ])("gpu-node platform access - %s", (_name, host, databases, problem) => {
    const why = grantProblem({ token, databases }, host);
    if (problem === null) expect(why).toBeNull();
    else expect(why).toMatch(problem);
    expect(why ?? "").not.toMatch(/cit_|secret/);
  });

  test("gpu-node platform access - a Docker job: the forwarder in front of its entrypoint, the folder and host node bound read-only, the grant only in Env", () => {
    const card = { uuid: "GPU-1", index: 0, name: "sim", memoryTotal: 1, memoryUsed: 0, utilization: 0, temperature: 0, simulated: true };
    const spec = { jobId: "job-1", card, command: "python train.py", platform: { token, databases: [db("d", "u", "secret")] } };
    const ctx = { nodeId: "n", namespace: "ns", defaultImage: "img", allowedRegistries: [], limits: { memoryMb: 64, cpus: 1, pids: 64, network: "none" } };
    const plain = containerSpec(spec, ctx);
    const access: PlatformAccess = { relay: { dir: "/var/relay/job-1" } as JobRelay, env: platformEnv(spec.platform), routes: forwardRoutes(true) };
    const request = withRelay(plain, access, "/usr/local/bin/node");
    const { loader, libs } = loaderOf();
    expect(request.Entrypoint).toEqual([`${CONTAINER_LIBS}/${loader.slice(libs.length + 1)}`]);
    expect(request.Cmd!.slice(0, 4)).toEqual(["--library-path", CONTAINER_LIBS, CONTAINER_NODE, "-e"]);
    expect(request.Cmd!.slice(5)).toEqual([
      "--",
      "8080=/run/ci-platform/platform.sock",
      "5432=/run/ci-platform/postgres.sock",
      "--",
      ...plain.Entrypoint!,
      ...plain.Cmd!,
    ]);
    expect(request.HostConfig!.Binds).toEqual([
      `/var/relay/job-1:${RELAY_MOUNT}:ro`,
      `/usr/local/bin/node:${CONTAINER_NODE}:ro`,
      `${libs}:${CONTAINER_LIBS}:ro`,
    ]);
    expect(request.HostConfig!.NetworkMode).toBe("none");
    expect(request.Env).toEqual([...plain.Env!, ...Object.entries(access.env).map(([k, v]) => `${k}=${v}`)]);
    const { Env: _env, ...rest } = request;
    expect(JSON.stringify(rest)).not.toMatch(/cit_|secret/);
    // Without a grant the request is exactly as before.
    expect(containerSpec({ ...spec, platform: undefined }, ctx)).toEqual(plain);
  });
});
