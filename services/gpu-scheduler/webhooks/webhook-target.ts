/**
 * Where a webhook may go (API-DECISIONS "GPU jobs: live output and events"): an absolute http(s)
 * URL of at most 2048 characters whose host is, and resolves only to, global unicast addresses
 * (no loopback, private, link-local, reserved or other special-purpose one; unless
 * WEBHOOK_ALLOW_PRIVATE=true). Checked at submission and again at each delivery, which then
 * connects to the very address it checked (no DNS rebinding between the check and the connection).
 */
import ipaddr from "ipaddr.js";
import { isIP } from "net";

import { WEBHOOK_URL_MAX } from "../../../lib/job-spec";

/** IANA's global unicast allocation: every other IPv6 block is reserved, deprecated (::/96 IPv4-compatible) or special. */
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR("2000::/3");
/** The well-known NAT64 prefix (RFC 6052): its addresses stand for the IPv4 address in their last 32 bits. */
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR("64:ff9b::/96");

/** The IPv4 address in an IPv6 one's last 32 bits. */
const lastIpv4 = (v6: ipaddr.IPv6) => new ipaddr.IPv4([v6.parts[6] >> 8, v6.parts[6] & 255, v6.parts[7] >> 8, v6.parts[7] & 255]);

/**
 * Whether an IP address is one a webhook must not reach (pure): anything but plain global unicast
 * in IANA's special-purpose registries (ipaddr.js's range()). An IPv4-mapped or well-known NAT64
 * address is judged by the IPv4 address it carries; 6to4, Teredo and IPv4-translated are refused.
 */
export function isPrivateAddress(address: string): boolean {
  if (!isIP(address)) return true; // not an address: never connect to it
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return true;
  }
  if (parsed.kind() === "ipv4") return (parsed as ipaddr.IPv4).range() !== "unicast";
  const v6 = parsed as ipaddr.IPv6;
  if (v6.range() === "ipv4Mapped" || v6.match(NAT64_WELL_KNOWN)) return lastIpv4(v6).range() !== "unicast";
  return v6.range() !== "unicast" || !v6.match(GLOBAL_UNICAST_V6);
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
    return { ok: false, reason: "must not point to a loopback, private, link-local, reserved or other special-purpose address" };
  return { ok: true, url: parsed.url, address: addresses[0].address, family: addresses[0].family === 6 ? 6 : 4 };
}
