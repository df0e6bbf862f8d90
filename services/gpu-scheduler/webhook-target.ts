/**
 * Where a webhook may go (API-DECISIONS "GPU jobs: live output and events"): an absolute http(s)
 * URL of at most 2048 characters whose host is not, and does not resolve to, a loopback, private,
 * link-local or unique-local address (unless WEBHOOK_ALLOW_PRIVATE=true). Checked at submission
 * and again at each delivery, which then connects to the very address it checked (no DNS
 * rebinding between the check and the connection).
 */
import { BlockList, isIP } from "net";

export const WEBHOOK_URL_MAX = 2048;

const blocked = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8], // "this" network
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local (cloud metadata)
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 3], // multicast and reserved, broadcast
] as const)
  blocked.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7], // unique-local
  ["fe80::", 10], // link-local
  ["ff00::", 8], // multicast
] as const)
  blocked.addSubnet(net, prefix, "ipv6");

/** An IPv4 address carried in an IPv6 one (::ffff:a.b.c.d, NAT64 64:ff9b::/96), as dotted text. */
function embeddedIpv4(address: string): string | undefined {
  const lower = address.toLowerCase();
  const dotted = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1];
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (!hex) return undefined;
  const [hi, lo] = [parseInt(hex[1], 16), parseInt(hex[2], 16)];
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join(".");
}

/** Whether an IP address is one a webhook must not reach (pure). */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, "ipv4");
  if (family !== 6) return true; // not an address: never connect to it
  const v4 = embeddedIpv4(address);
  return v4 !== undefined ? blocked.check(v4, "ipv4") : blocked.check(address, "ipv6");
}

/** The URL's problem, or its parsed form (pure: no DNS). */
export function parseWebhookUrl(raw: string): { ok: true; url: URL } | { ok: false; reason: string } {
  if (raw.length > WEBHOOK_URL_MAX) return { ok: false, reason: `must be at most ${WEBHOOK_URL_MAX} characters` };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: "must be an absolute http(s) URL" };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return { ok: false, reason: "must be an http or https URL" };
  if (!url.hostname) return { ok: false, reason: "must name a host" };
  return { ok: true, url };
}

export type Lookup = (host: string) => Promise<Array<{ address: string; family: number }>>;
export type Target = { ok: true; url: URL; address: string; family: 4 | 6 } | { ok: false; reason: string };

/**
 * The address to connect to for `raw`: its host's (every address it resolves to must be allowed,
 * so a name cannot hide a private one among public ones), or the refusal.
 */
export async function resolveTarget(raw: string, lookup: Lookup, allowPrivate: boolean): Promise<Target> {
  const parsed = parseWebhookUrl(raw);
  if (!parsed.ok) return parsed;
  const host = parsed.url.hostname.replace(/^\[(.*)\]$/, "$1");
  let addresses: Array<{ address: string; family: number }>;
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await lookup(host);
    } catch {
      return { ok: false, reason: `host ${host} could not be resolved` };
    }
  }
  if (!addresses.length) return { ok: false, reason: `host ${host} could not be resolved` };
  if (!allowPrivate && addresses.some((a) => isPrivateAddress(a.address)))
    return { ok: false, reason: "must not point to a loopback, private, link-local or unique-local address" };
  return { ok: true, url: parsed.url, address: addresses[0].address, family: addresses[0].family === 6 ? 6 : 4 };
}
