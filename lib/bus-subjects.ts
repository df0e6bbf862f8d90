/**
 * Sender-bound NATS subjects (pure). On an authenticated bus every packet a process publishes
 * goes to a subject ending with its own node id, `<role>.<instance>` (two subject tokens):
 *   MOL[-ns].<CMD>[.<target nodeID>].<senderRole>.<senderInstance>        (discovery, answers)
 *   MOL[-ns].REQ.<target nodeID>.<action>.<senderRole>.<senderInstance>   (calls; EVENT likewise)
 *   MOL[-ns].REQB.<action>.<sender…> / EVENTB.<group>.<event>.<sender…>    (with disableBalancer)
 * NATS permissions let a user publish only under its own sender tokens, and a receiver drops any
 * packet whose payload `sender` is not the subject's: the sender id a service sees is the NATS
 * user's, not whatever a packet claims.
 */

/** `<role>.<instance>`: exactly two subject tokens. */
export const BUS_NODE_ID = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export const isBusNodeID = (nodeID: unknown): nodeID is string => typeof nodeID === "string" && BUS_NODE_ID.test(nodeID);

/** Subject with the publishing node's tokens appended. */
export const withSender = (subject: string, senderNodeID: string): string => `${subject}.${senderNodeID}`;

/** Subscription matching any sender after `subject` (a trailing `>` already matches them). */
export const anySender = (subject: string): string => (subject.endsWith(">") ? subject : `${subject}.*.*`);

/** The node id a subject was published under: its last two tokens. */
export function senderOfSubject(subject: string): string | undefined {
  const last = subject.lastIndexOf(".");
  if (last <= 0) return undefined;
  const before = subject.lastIndexOf(".", last - 1);
  return before < 0 ? undefined : subject.slice(before + 1);
}

/** The reason given for a packet with this node's own id: NATS echoes a process's broadcasts back to it. */
export const OWN_ECHO = "own id";

/** Packets a process may legitimately receive with its own id as sender (its own balanced calls). */
const OWN_PACKETS_OK = new Set(["REQ", "RES", "EVENT"]);

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Why an incoming packet must be dropped, or undefined to accept it. `subjectSender` is the
 * sender taken from the subject (undefined when subjects are not sender-bound).
 */
export function rejectPacket(cmd: string, payload: unknown, ownNodeID: string, subjectSender: string | undefined, senderBound: boolean): string | undefined {
  if (!isObject(payload)) return "not an object";
  const sender = payload.sender;
  if (typeof sender !== "string" || sender === "") return "no sender";
  if (senderBound && sender !== subjectSender) return `sender "${sender}" published under "${subjectSender}"`;
  // Moleculer stops a process that sees its own id in another's INFO ("nodeID conflict"): a
  // forged or duplicated id must never reach it.
  if (sender === ownNodeID && !OWN_PACKETS_OK.has(cmd)) return OWN_ECHO;
  switch (cmd) {
    case "REQ":
      return typeof payload.id === "string" && typeof payload.action === "string" ? undefined : "malformed request";
    case "RES":
      return typeof payload.id === "string" ? undefined : "malformed response";
    case "EVENT":
      return typeof payload.event === "string" ? undefined : "malformed event";
    case "INFO":
      return Array.isArray(payload.services) ? undefined : "malformed node info";
    default:
      return undefined;
  }
}
