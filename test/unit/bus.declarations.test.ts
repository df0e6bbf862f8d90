/**
 * The bus tables come from what the services' schemas declare (`emits`, `publishes`, `events`,
 * `channels`): the pure derivation, and a check over the services' sources that every event and
 * channel message a service sends is declared, since an undeclared one is refused by the NATS
 * permissions on an authenticated bus (and only there).
 */
import fs from "fs";
import path from "path";
import type { ServiceSchema } from "moleculer";
import ts from "typescript";
import { busTables } from "../../lib/bus-permissions";
import { USAGE_CHANNEL, USAGE_OWNERS } from "../../lib/usage-protocol";
import { platformBusTables, SERVICE_REGISTRY } from "../../moleculer.config";
import { tsFilesUnder } from "../support/source-files";

const handler = () => undefined;

describe("bus tables - derived from schemas", () => {
  const emitter: ServiceSchema = {
    name: "a",
    emits: [
      { event: "x.done", kind: "emit" },
      { event: "y.seen", kind: "broadcast" },
    ],
    publishes: ["ch.one"],
  };
  const handlers: ServiceSchema = {
    name: "b",
    mixins: [{ name: "m", events: { "y.seen": handler } }],
    events: { "x.done": handler, "$node.connected": handler },
    channels: { "ch.one.>": { handler } },
  };
  const tables = busTables([emitter, handlers, { name: "c", events: { "y.seen": { handler } } }]);

  it.each([
    ["an emitted event goes to its handlers' services", "x.done", { from: ["a"], to: ["b"], kind: "emit" }],
    ["a handler from a mixin counts, as Moleculer merges it", "y.seen", { from: ["a"], to: ["b", "c"], kind: "broadcast" }],
  ])("bus tables - %s", (_name, event, row) => {
    expect(tables.events.find((e) => e.event === event)).toEqual({ event, ...row });
  });

  it("bus tables - local ($) and undeclared events are not on the bus", () => {
    expect(tables.events.map((e) => e.event)).toEqual(["x.done", "y.seen"]);
  });

  it("bus tables - a channel goes from its publishers to the consumers of its per-sender key", () => {
    expect(tables.channels).toEqual([{ channel: "ch.one", publishers: ["a"], consumers: ["b"] }]);
  });

  it("bus tables - an event declared both broadcast and emit is refused", () => {
    const other: ServiceSchema = { name: "d", emits: [{ event: "x.done", kind: "broadcast" }] };
    expect(() => busTables([emitter, other])).toThrow(/x\.done.*both/);
  });
});

/** What a service's code sends: `<kind> <event>` for broadcast/emit, `channel <name>` for sendToChannel. */
type Sent = { service: string; what: string; at: string };

const ROOT = path.resolve(__dirname, "../..");
const SERVICES_DIR = path.join(ROOT, "services");

const parse = (fileName: string) => ts.createSourceFile(fileName, fs.readFileSync(fileName, "utf8"), ts.ScriptTarget.Latest, true);

/**
 * The string a constant argument stands for: a literal, or a `const` of the file or of the module
 * it is imported from (read, not run). Anything else is reported as unknown, and fails the check.
 */
function constantOf(expr: ts.Expression, file: ts.SourceFile): string | undefined {
  if (ts.isStringLiteralLike(expr)) return expr.text;
  return ts.isIdentifier(expr) ? constantNamed(expr.text, file) : undefined;
}

function constantNamed(name: string, file: ts.SourceFile): string | undefined {
  for (const stmt of file.statements) {
    if (ts.isVariableStatement(stmt))
      for (const decl of stmt.declarationList.declarations)
        if (ts.isIdentifier(decl.name) && decl.name.text === name && decl.initializer && ts.isStringLiteralLike(decl.initializer)) return decl.initializer.text;
    const bindings = ts.isImportDeclaration(stmt) ? stmt.importClause?.namedBindings : undefined;
    const spec = bindings && ts.isNamedImports(bindings) ? bindings.elements.find((e) => e.name.text === name) : undefined;
    if (!spec || !ts.isImportDeclaration(stmt) || !ts.isStringLiteral(stmt.moduleSpecifier)) continue;
    const module = `${path.resolve(path.dirname(file.fileName), stmt.moduleSpecifier.text)}.ts`;
    return fs.existsSync(module) ? constantNamed((spec.propertyName ?? spec.name).text, parse(module)) : undefined;
  }
  return undefined;
}

const calleeName = (call: ts.CallExpression) =>
  ts.isPropertyAccessExpression(call.expression) ? call.expression.name.text : ts.isIdentifier(call.expression) ? call.expression.text : undefined;

/** broker.broadcast/emit (a broker or a Context), and sendToChannel(broker, ownChannel(C, id), …) or broker.sendToChannel(ownChannel(C, id), …). */
function sendsOf(service: string, fileName: string): Sent[] {
  const file = parse(fileName);
  const sent: Sent[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node)) {
      const name = calleeName(node);
      const at = `${path.relative(ROOT, fileName)}:${file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1}`;
      const receiver = ts.isPropertyAccessExpression(node.expression) ? node.expression.expression.getText(file) : "";
      if ((name === "broadcast" || name === "emit") && /(^|\.)(broker|ctx)$/.test(receiver) && node.arguments[0]) {
        sent.push({ service, what: `${name} ${constantOf(node.arguments[0], file) ?? `? ${node.arguments[0].getText(file)}`}`, at });
      } else if (name === "sendToChannel") {
        const target = node.arguments[receiver ? 0 : 1];
        const own = target && ts.isCallExpression(target) && calleeName(target) === "ownChannel" ? target.arguments[0] : undefined;
        sent.push({ service, what: `channel ${(own && constantOf(own, file)) ?? `? ${target?.getText(file)}`}`, at });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return sent;
}

describe("bus tables - the platform's services send only what they declare", () => {
  const schemas = Object.values(SERVICE_REGISTRY).map((load) => load());
  const sent = schemas.flatMap((s) => tsFilesUnder(path.join(SERVICES_DIR, s.name)).flatMap((f) => sendsOf(s.name, f)));
  const declaredBy = (s: ServiceSchema) => [...(s.emits ?? []).map((d) => `${d.kind} ${d.event}`), ...(s.publishes ?? []).map((c) => `channel ${c}`)];
  const declared = new Set(schemas.flatMap((s) => declaredBy(s).map((what) => `${s.name}: ${what}`)));
  const tables = platformBusTables();

  it("bus tables - the sources' sends are found (the check below is not vacuous)", () => {
    expect(sent.map((s) => s.what)).toEqual(expect.arrayContaining(["broadcast gpu-node.heartbeat", "emit inference.completed", `channel ${USAGE_CHANNEL}`]));
  });

  it("bus tables - every event or channel message a service sends is declared on its schema (`emits`, `publishes`)", () => {
    const undeclared = sent.filter((s) => !declared.has(`${s.service}: ${s.what}`)).map((s) => `${s.at}: ${s.what} (not declared by ${s.service})`);
    expect(undeclared).toEqual([]);
  });

  it("bus tables - every declaration is sent by its service (no permission left over)", () => {
    const sends = new Set(sent.map((s) => `${s.service}: ${s.what}`));
    expect([...declared].filter((d) => !sends.has(d))).toEqual([]);
  });

  it("bus tables - every bus event has a handler and every handled event a sender", () => {
    expect(tables.events.filter((e) => !e.to.length).map((e) => e.event)).toEqual([]);
    const handled = schemas.flatMap((s) => Object.keys(s.events ?? {}).filter((e) => !e.startsWith("$")));
    expect(handled.filter((e) => !tables.events.some((row) => row.event === e))).toEqual([]);
  });

  it("bus tables - every channel has consumers, and usage records come from exactly their owners", () => {
    expect(tables.channels.filter((c) => !c.consumers.length || !c.publishers.length)).toEqual([]);
    const usage = tables.channels.find((c) => c.channel === USAGE_CHANNEL);
    expect([...(usage?.publishers ?? [])].sort()).toEqual(Object.values(USAGE_OWNERS).sort());
  });
});
