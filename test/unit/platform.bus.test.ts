/** The authenticated bus's pure parts: subjects, packet checks, node ids, permissions, server config. */
import { busSetup, natsConnectionOptions, processNodeID } from "../../lib/bus-connection";
import { parsePlatformSettings } from "../../lib/platform-settings";
import { CallerTableRow, SERVICE_ROLES } from "../../lib/bus-identity";
import fs from "fs";
import path from "path";
import { parseAllDocuments } from "yaml";
import { platformBusTables } from "../../moleculer.config";
import { busPermissions } from "../../lib/bus-permissions";
import { generateBus } from "../../lib/bus-setup";
import { renderServerConfig } from "../../lib/bus-server-config";
import { OWN_ECHO, rejectPacket, senderOfSubject } from "../../lib/bus-subjects";

describe("bus - subjects and packets", () => {
  it.each([
    ["MOL.INFO.auth.h-1", "auth.h-1"],
    ["MOL-ns.REQ.gpu-node.a.gpu-node.run.gpu-scheduler.h-2", "gpu-scheduler.h-2"],
    ["MOL", undefined],
    ["MOL.INFO", undefined],
  ])("bus - the sender of %s is %s", (subject, sender) => {
    expect(senderOfSubject(subject)).toBe(sender);
  });

  const me = "gpu-scheduler.h-1";
  const cases: Array<[string, string, unknown, string | undefined, boolean, string | RegExp | undefined]> = [
    ["a well-formed request", "REQ", { sender: "api-gateway.g", id: "1", action: "a.b" }, "api-gateway.g", true, undefined],
    ["a sender that is not the subject's", "REQ", { sender: "api-gateway.g", id: "1", action: "a.b" }, "gpu-node.n2", true, /published under/],
    ["the same packet on an open bus", "REQ", { sender: "api-gateway.g", id: "1", action: "a.b" }, undefined, false, undefined],
    ["an INFO with this node's id", "INFO", { sender: me, services: [] }, me, true, OWN_ECHO],
    ["its own balanced call", "REQ", { sender: me, id: "1", action: "a.b" }, me, true, undefined],
    ["no sender", "HEARTBEAT", { cpu: 1 }, undefined, false, "no sender"],
    ["not an object", "EVENT", [1, 2], undefined, false, "not an object"],
    ["an INFO without services", "INFO", { sender: "auth.a" }, "auth.a", true, "malformed node info"],
    ["a request without action", "REQ", { sender: "auth.a", id: "1" }, "auth.a", true, "malformed request"],
  ];
  it.each(cases)("bus - %s", (_name, cmd, payload, subjectSender, bound, expected) => {
    const reason = rejectPacket(cmd, payload, me, subjectSender, bound);
    if (expected === undefined) expect(reason).toBeUndefined();
    else if (expected instanceof RegExp) expect(reason).toMatch(expected);
    else expect(reason).toBe(expected);
  });
});

describe("bus - connection and node ids", () => {
  it.each([
    ["plain", "nats://127.0.0.1:4222", {}, { servers: ["127.0.0.1:4222"] }],
    ["tls scheme", "tls://nats:4222", {}, { servers: ["nats:4222"], tls: {} }],
    ["CA file", "nats://nats:4222", { caFile: "/ca.pem" }, { servers: ["nats:4222"], tls: { caFile: "/ca.pem" } }],
    ["credentials from settings", "nats://nats:4222", { user: "auth", pass: "pw" }, { servers: ["nats:4222"], user: "auth", pass: "pw" }],
    ["URL credentials win", "nats://a:b@nats:4222", { user: "auth", pass: "pw" }, { servers: ["nats:4222"], user: "a", pass: "b" }],
  ])("bus - %s", (_name, url, settings, expected) => {
    // Every connection: no async traces (nats.js would build an Error per request sent).
    expect(natsConnectionOptions(url, settings)).toEqual({ ...expected, noAsyncTraces: true });
  });

  const base = { host: "web.example", pid: 42 };
  it.each([
    ["core default", { role: "auth", senderBound: true }, "auth.web-example-42"],
    ["gpu-node by GPU_NODE_NAME", { role: "gpu-node", senderBound: true, gpuNodeName: "rack1" }, "gpu-node.rack1"],
    ["gpu-node by its NATS user", { role: "gpu-node", senderBound: true, natsUser: "gpu-node.rack2" }, "gpu-node.rack2"],
    ["explicit one-token id gets the role", { role: "auth", senderBound: true, explicit: "a1" }, "auth.a1"],
    ["explicit id kept on an open bus", { role: "auth", senderBound: false, explicit: "a1" }, "a1"],
    ["explicit role id kept", { role: "auth", senderBound: true, explicit: "auth.x" }, "auth.x"],
  ])("bus - node id: %s", (_name, inputs, expected) => {
    expect(processNodeID({ ...base, ...inputs })).toBe(expected);
  });

  it("bus - NODE_ENV=production refuses NATS without credentials, with a message saying what to set", () => {
    const env = { NODE_ENV: "production", TRANSPORTER: "nats://nats:4222" };
    expect(() => busSetup(["auth"], SERVICE_ROLES, parsePlatformSettings(env))).toThrow(/NATS_USER and NATS_PASSWORD/);
    const withUser = { ...env, NATS_USER: "auth", NATS_PASSWORD: "pw" };
    expect(busSetup(["auth"], SERVICE_ROLES, parsePlatformSettings(withUser))).toMatchObject({ senderBound: true, role: "auth", connection: { user: "auth" } });
  });
});

describe("bus - permissions", () => {
  const callers: CallerTableRow[] = [
    { action: "auth.createApiKey", callers: ["api-gateway"], rest: true },
    { action: "auth.resolveApiKey", callers: ["api-gateway"], rest: false },
    { action: "dbaas.destroy", callers: ["api-gateway"], rest: true },
    { action: "dbaas.stats", callers: ["metrics"], rest: false },
    { action: "gpu-node.run", callers: ["gpu-scheduler"], rest: false },
    { action: "gpu-scheduler.create", callers: ["api-gateway"], rest: true },
  ];
  const users = busPermissions({ ...platformBusTables(), namespace: "ns", callers }, ["n1"]);
  const node = users["gpu-node.n1"];

  it("bus - users: one per role, core, and one per gpu-node", () => {
    expect(Object.keys(users).sort()).toEqual([
      "admin",
      "api-gateway",
      "auth",
      "core",
      "dbaas",
      "gpu-node.n1",
      "gpu-scheduler",
      "inference",
      "metrics",
      "usage",
    ]);
  });

  it("bus - a gpu-node publishes only under its own id, never a call, and reads only its own subjects", () => {
    expect(node.publish.filter((s) => s.startsWith("MOL-ns.") && !s.endsWith(".gpu-node.n1"))).toEqual([]);
    expect(node.publish.filter((s) => /\.REQB?\./.test(s))).toEqual([]);
    expect(node.publish).toContain("ns.gpu.job-events.gpu-node.n1");
    expect(node.publish).toContain("MOL-ns.EVENT.gpu-scheduler.*.gpu-node.heartbeat.gpu-node.n1");
    expect(node.publish).toContain("MOL-ns.RES.gpu-scheduler.*.gpu-node.n1");
    expect(node.publish.some((s) => s.startsWith("$JS.API.STREAM"))).toBe(false);
    expect(node.subscribe.filter((s) => /REQB\.(auth|dbaas|gpu-scheduler)/.test(s) || s === ">" || s.startsWith("_INBOX.>"))).toEqual([]);
    expect(node.subscribe).toContain("_INBOX.gpu-node.n1.>");
  });

  it("bus - only the declared callers may call an action", () => {
    expect(users["api-gateway"].publish).toContain("MOL-ns.REQ.auth.*.auth.createApiKey.api-gateway.*");
    expect(users["api-gateway"].publish).toContain("MOL-ns.REQ.core.*.auth.createApiKey.api-gateway.*");
    expect(users["inference"].publish.some((s) => s.includes("auth."))).toBe(false);
    expect(users["metrics"].publish).toContain("MOL-ns.REQ.dbaas.*.dbaas.stats.metrics.*");
    expect(users["metrics"].publish.some((s) => s.includes("dbaas.destroy"))).toBe(false);
    expect(users["gpu-scheduler"].publish).toContain("MOL-ns.REQ.gpu-node.*.gpu-node.run.gpu-scheduler.*");
    expect(users["api-gateway"].publish.some((s) => s.includes("gpu-node.run"))).toBe(false);
    expect(users["auth"].subscribe).toContain("MOL-ns.REQ.auth.*.>");
  });

  it("bus - the server config has every user, JetStream flushing each write, and TLS when asked", () => {
    const text = renderServerConfig({
      listen: "0.0.0.0:4222",
      storeDir: "/data",
      tls: { certFile: "/tls/server.pem", keyFile: "/tls/server-key.pem" },
      users: [{ user: "auth", password: { env: "NATS_PASSWORD_AUTH" }, permissions: users.auth }],
    });
    expect(text).toContain("sync_interval: always");
    expect(text).toContain("password: $NATS_PASSWORD_AUTH");
    expect(text).toMatch(/tls \{[^}]*cert_file: "\/tls\/server.pem"/);
    expect(text).toContain('"MOL-ns.REQ.auth.*.>"');
  });
});

describe("bus - shipped NATS configurations", () => {
  const ROOT = path.resolve(__dirname, "../..");
  const generate = (gpuNodes: string[]) =>
    generateBus({
      gpuNodes,
      ...platformBusTables(),
      httpPort: 8222,
      storeDir: "/data",
      tls: { certFile: "/etc/nats/tls/server.pem", keyFile: "/etc/nats/tls/server-key.pem" },
    }).config;

  it("bus - docker/nats-server.conf is what `npm run bus:config -- --tls` makes from the actions' callers today", () => {
    expect(fs.readFileSync(path.join(ROOT, "docker/nats-server.conf"), "utf8")).toBe(generate(["gpu-1"]));
  });

  it("bus - k8s/base/10-nats.yaml embeds what `npm run bus:config -- --k8s k8s/base/10-nats.yaml --nodes gpu-host-1` makes", () => {
    const docs = parseAllDocuments(fs.readFileSync(path.join(ROOT, "k8s/base/10-nats.yaml"), "utf8")).map((d) => d.toJS());
    const conf = docs.find((d) => d?.kind === "ConfigMap" && d.metadata.name === "nats-config").data["nats-server.conf"];
    expect(conf).toBe(generate(["gpu-host-1"]));
  });
});
