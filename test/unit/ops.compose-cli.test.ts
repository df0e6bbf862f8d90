/**
 * test/support/compose-cli.ts's canonical form (no Compose run): what docker-compose 1.29 and
 * `docker compose` v2 spell differently becomes one form; anything else, a real difference, stays.
 */
import { canonicalConfig, composeCommand, seconds } from "../support/compose-cli";

describe("ops compose cli - one form for both Composes' config output", () => {
  it.each([
    ["1m0s", 60],
    ["1m", 60],
    ["2m30s", 150],
    ["40s", 40],
    ["500ms", 0.5],
    ["1h", 3600],
    ["", ""],
    ["soon", "soon"],
    [5, 5],
  ])("ops compose cli - the duration %p is %p", (input, expected) => {
    expect(seconds(input)).toBe(expected);
  });

  it("ops compose cli - the commands: docker-compose, or docker's compose plugin", () => {
    expect(composeCommand("v1", ["config"])).toEqual(["docker-compose", ["config"]]);
    expect(composeCommand("v2", ["config"])).toEqual(["docker", ["compose", "config"]]);
  });

  it("ops compose cli - 1.29's and v2's spellings of one service are equal", () => {
    const v1 = {
      services: {
        s: {
          depends_on: { db: { condition: "service_healthy" } },
          healthcheck: { interval: "5s", start_period: "1m", retries: 3 },
          ports: [{ published: 3000, target: 3000 }],
          volumes: ["data:/data:rw", "/srv/a.pem:/etc/a.pem:ro"],
          build: { context: "/srv/x" },
          deploy: { resources: { reservations: { devices: [{ driver: "nvidia", count: "all" }] } } },
        },
      },
      volumes: { data: {} },
      version: "3.9",
    };
    const v2 = {
      name: "srv",
      services: {
        s: {
          depends_on: { db: { condition: "service_healthy", required: true } },
          healthcheck: { interval: "5s", start_period: "1m0s", retries: 3 },
          ports: [{ mode: "ingress", target: 3000, published: "3000", protocol: "tcp" }],
          volumes: [
            { type: "bind", source: "/srv/a.pem", target: "/etc/a.pem", read_only: true, bind: { create_host_path: true } },
            { type: "volume", source: "data", target: "/data", volume: {} },
          ],
          build: { context: "/srv/x", dockerfile: "Dockerfile" },
          networks: { default: null },
          deploy: { resources: { reservations: { devices: [{ driver: "nvidia", count: -1 }] } } },
        },
      },
      volumes: { data: { name: "srv_data" } },
    };
    expect(canonicalConfig(v2)).toEqual(canonicalConfig(v1));
    expect(canonicalConfig(v1).services.s.volumes).toEqual(["bind /srv/a.pem → /etc/a.pem (ro)", "volume data → /data (rw)"]);
  });

  it.each([
    ["a value", { environment: { JWT_SECRET: "abc$$def" } }, { environment: { JWT_SECRET: "abc" } }],
    ["a read-only mount", { volumes: ["data:/data:ro"] }, { volumes: [{ type: "volume", source: "data", target: "/data", volume: {} }] }],
    ["a mount's option", { volumes: ["data:/data:rw"] }, { volumes: [{ type: "volume", source: "data", target: "/data", volume: { nocopy: true } }] }],
    [
      "a dependency v2 does not require",
      { depends_on: { db: { condition: "service_started" } } },
      { depends_on: { db: { condition: "service_started", required: false } } },
    ],
    ["a port's protocol", { ports: [{ published: 53, target: 53 }] }, { ports: [{ target: 53, published: "53", protocol: "udp" }] }],
    ["a duration", { healthcheck: { interval: "5s" } }, { healthcheck: { interval: "50s" } }],
    ["a network", { network_mode: "host" }, { networks: { default: null } }],
  ])("ops compose cli - %s interpreted differently stays a difference", (_what, v1, v2) => {
    expect(canonicalConfig({ services: { s: v2 } })).not.toEqual(canonicalConfig({ services: { s: v1 } }));
  });

  it("ops compose cli - a volume named differently stays a difference; the input is not changed", () => {
    const v2 = { services: {}, volumes: { data: { name: "elsewhere" } } };
    expect(canonicalConfig(v2)).not.toEqual(canonicalConfig({ services: {}, volumes: { data: {} } }));
    const input = { services: { s: { deploy: { resources: { reservations: { devices: [{ count: -1 }] } } } } } };
    canonicalConfig(input);
    expect(input.services.s.deploy.resources.reservations.devices[0].count).toBe(-1);
  });
});
