/**
 * Which registries job images may come from: an operator allow-list (GPU_ALLOWED_REGISTRIES).
 * A pull makes the host's Docker engine connect to the registry host, so an image reference is a
 * URL a client chooses: without the list, `127.0.0.1:4222/x:1` turns the GPU host into a port
 * scanner of its own loopback and private networks. Pure; checked by gpu-scheduler when a job is
 * created (400) and again by gpu-node before it creates or pulls (defence in depth). The syntax
 * of an image name is the job's own (lib/job-spec.ts).
 */
import net from "net";

/** Public registries allowed when the operator names none. */
export const DEFAULT_ALLOWED_REGISTRIES = ["docker.io", "nvcr.io", "ghcr.io", "quay.io", "registry.k8s.io", "public.ecr.aws", "mcr.microsoft.com"];

/** Docker Hub's other names, all meaning docker.io. */
const DOCKER_HUB_ALIASES = new Set(["index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"]);

export type ImageCheck = { ok: true; registry: string } | { ok: false; registry: string; reason: string };

/**
 * The registry host[:port] of an image reference, as the Docker engine reads it: the first path
 * component is a registry when it has a dot or a colon, is `localhost`, or has capitals;
 * otherwise (and with no slash) the image is on docker.io. Lowercased; Hub aliases → docker.io.
 */
export function registryOf(reference: string): string {
  const slash = reference.indexOf("/");
  const first = slash < 0 ? "" : reference.slice(0, slash);
  const isRegistry = first !== "" && (/[.:]/.test(first) || first === "localhost" || first !== first.toLowerCase());
  if (!isRegistry) return "docker.io";
  const host = first.toLowerCase();
  return DOCKER_HUB_ALIASES.has(host) ? "docker.io" : host;
}

/** The host part of `host[:port]`, `[v6]:port` or a bare IPv6 address. */
function hostOf(registry: string): string {
  const bracketed = /^\[([^\]]+)\](:\d+)?$/.exec(registry);
  if (bracketed) return bracketed[1];
  const colon = registry.lastIndexOf(":");
  return colon > 0 && registry.indexOf(":") === colon ? registry.slice(0, colon) : registry;
}

/** Loopback, private, link-local, unique-local, unspecified or carrier-grade NAT addresses. */
export function isInternalAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) {
    const [a, b] = address.split(".").map(Number);
    return (
      a === 0 ||
      a === 10 ||
      a === 127 ||
      (a === 100 && b >= 64 && b <= 127) ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168)
    );
  }
  if (family === 6) {
    const lower = address.toLowerCase();
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
    if (mapped) return isInternalAddress(mapped[1]);
    return lower === "::" || lower === "::1" || /^f[cd]/.test(lower) || /^fe[89ab]/.test(lower);
  }
  return false;
}

/** Why a registry host not on the list is refused, in a client's words. */
function refusal(registry: string): string {
  const host = hostOf(registry);
  if (host === "localhost" || host.endsWith(".localhost") || isInternalAddress(host))
    return `registry ${registry} is a loopback or private address; images may only come from the operator's allowed registries`;
  return `registry ${registry} is not one of the operator's allowed registries`;
}

/** Parses GPU_ALLOWED_REGISTRIES: a comma list of host[:port], lowercased (Hub aliases → docker.io). */
export function parseAllowedRegistries(raw: string | undefined): string[] {
  if (raw === undefined || raw.trim() === "") return [...DEFAULT_ALLOWED_REGISTRIES];
  return raw
    .split(",")
    .map((r) => r.trim().toLowerCase())
    .filter(Boolean)
    .map((r) => (DOCKER_HUB_ALIASES.has(r) ? "docker.io" : r));
}

/** Whether `reference` may be used: its registry must be on `allowed` exactly (host and port). */
export function checkImage(reference: string, allowed: string[]): ImageCheck {
  const registry = registryOf(reference.trim());
  if (allowed.includes(registry)) return { ok: true, registry };
  return { ok: false, registry, reason: refusal(registry) };
}
