/**
 * The two Compose implementations the compose stack supports (docs/operations.md "Deploy with Docker
 * Compose"; both installed by .ci/setup.d/41-docker-compose.sh): Debian 12's `docker-compose` 1.29 and
 * Compose v2, the Docker CLI plugin (`docker compose`). Their `config` output spells the same
 * configuration differently (short or long volume syntax, "1m" or "1m0s", count all or -1, the
 * defaults v2 writes out); canonicalConfig reduces both to one form, so comparing the two shows only
 * a real difference in interpretation. Anything it does not know passes through unchanged.
 */
export type ComposeCli = "v1" | "v2";

export const COMPOSE_CLIS: Record<ComposeCli, { command: string; args: string[] }> = {
  v1: { command: "docker-compose", args: [] },
  v2: { command: "docker", args: ["compose"] },
};

/** The program and arguments that run `args` through `cli`. */
export function composeCommand(cli: ComposeCli, args: string[]): [string, string[]] {
  const { command, args: prefix } = COMPOSE_CLIS[cli];
  return [command, [...prefix, ...args]];
}

type Json = Record<string, any>;

/** Go's and Compose 1's durations ("1m0s", "1m", "40s", "500ms") in seconds; anything else unchanged. */
export function seconds(value: unknown): unknown {
  if (typeof value !== "string") return value;
  const m = /^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$/.exec(value);
  if (!m || value === "") return value;
  const [, h = "0", min = "0", s = "0", ms = "0"] = m;
  return Number(h) * 3600 + Number(min) * 60 + Number(s) + Number(ms) / 1000;
}

/** One mount as `type source → target (ro|rw)`: Compose 1 writes "source:target:mode", v2 an object. */
function mount(volume: unknown): unknown {
  if (typeof volume === "string") {
    const parts = volume.split(":");
    if (parts.length === 1) return `volume (anonymous) → ${parts[0]} (rw)`;
    const [source, target, mode = "rw"] = parts;
    return `${/^[./~]/.test(source) ? "bind" : "volume"} ${source} → ${target} (${mode})`;
  }
  const { type, source, target, read_only, bind, volume: options, ...rest } = volume as Json;
  // Compose 1's short syntax also makes a missing bind source (the engine does): create_host_path is its default.
  const bindDefault = bind === undefined || (Object.keys(bind).length === 1 && bind.create_host_path === true);
  const volumeDefault = options === undefined || options === null || Object.keys(options).length === 0;
  // Anything beyond the defaults (propagation, nocopy, ...) stays visible.
  if (!bindDefault || !volumeDefault || Object.keys(rest).length) return volume;
  return `${type} ${source ?? "(anonymous)"} → ${target} (${read_only ? "ro" : "rw"})`;
}

function port(p: unknown): unknown {
  if (typeof p !== "object" || p === null) return p;
  const { published, target, protocol = "tcp", mode = "ingress", ...rest } = p as Json;
  return Object.keys(rest).length || mode !== "ingress" ? p : `${published}:${target}/${protocol}`;
}

function service(s: Json): Json {
  const out: Json = { ...s };
  if (out.healthcheck)
    out.healthcheck = Object.fromEntries(
      Object.entries<unknown>(out.healthcheck).map(([k, v]) => [k, ["interval", "timeout", "start_period", "start_interval"].includes(k) ? seconds(v) : v]),
    );
  if (out.stop_grace_period !== undefined) out.stop_grace_period = seconds(out.stop_grace_period);
  if (out.depends_on)
    out.depends_on = Object.fromEntries(
      Object.entries<Json>(out.depends_on).map(([name, d]) => {
        const { required, ...rest } = d ?? {};
        return [name, required === true || required === undefined ? rest : d];
      }),
    );
  if (Array.isArray(out.volumes)) out.volumes = out.volumes.map(mount).sort();
  if (Array.isArray(out.ports)) out.ports = out.ports.map(port).sort();
  if (out.build && typeof out.build === "object" && out.build.dockerfile === "Dockerfile") {
    const { dockerfile, ...build } = out.build;
    out.build = build;
  }
  // v2 writes out the implicit default network; Compose 1 leaves it implicit.
  if (out.networks && Object.keys(out.networks).length === 1 && out.networks.default === null) delete out.networks;
  for (const device of out.deploy?.resources?.reservations?.devices ?? []) if (device.count === -1) device.count = "all";
  return out;
}

/** The services and named volumes of a `config` output, in one form for both implementations. */
export function canonicalConfig(config: Json): { services: Json; volumes: Json } {
  const services = Object.fromEntries(Object.entries<Json>(config.services ?? {}).map(([name, s]) => [name, service(structuredClone(s))]));
  const volumes = Object.fromEntries(
    Object.entries<Json | null>(config.volumes ?? {}).map(([name, v]) => {
      // v2 names each volume project_name, as Compose 1 does when it creates it.
      const { name: full, ...rest } = v ?? {};
      return [name, full === undefined || String(full).endsWith(`_${name}`) ? rest : v];
    }),
  );
  return { services, volumes };
}
