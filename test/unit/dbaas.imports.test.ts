/**
 * dbaas imports: no file of services/dbaas imports itself back through others (type imports
 * included), so the action modules take the app's type from app.ts, never the service file. Pure: reads the sources.
 */
import { readdirSync, readFileSync } from "fs";
import path from "path";

type Graph = Record<string, string[]>;

/** The sibling files each .ts file of `dir` imports or re-exports from ("./x"). */
function siblingImports(dir: string): Graph {
  const files = readdirSync(dir).filter((f) => f.endsWith(".ts"));
  const graph: Graph = {};
  for (const file of files) {
    const source = readFileSync(path.join(dir, file), "utf8");
    const targets = [...source.matchAll(/^(?:import|export)\s[^;]*?\sfrom\s+"\.\/([^"]+)"/gm)].map((m) => `${m[1]}.ts`);
    graph[file] = [...new Set(targets.filter((t) => files.includes(t)))];
  }
  return graph;
}

/** Every cycle once, as the path from its first file (in name order) back to it. */
function cycles(graph: Graph): string[] {
  const found: string[] = [];
  const walk = (start: string, node: string, trail: string[]) => {
    for (const next of graph[node] ?? []) {
      if (next === start) found.push([...trail, start].join(" -> "));
      else if (next > start && !trail.includes(next)) walk(start, next, [...trail, next]);
    }
  };
  for (const file of Object.keys(graph).sort()) walk(file, file, [file]);
  return found;
}

describe("dbaas imports", () => {
  it.each<[string, Graph, string[]]>([
    ["none in a chain", { "a.ts": ["b.ts"], "b.ts": ["c.ts"], "c.ts": [] }, []],
    ["a service and its actions", { "svc.ts": ["actions.ts"], "actions.ts": ["svc.ts"] }, ["actions.ts -> svc.ts -> actions.ts"]],
    ["through a third file", { "a.ts": ["b.ts"], "b.ts": ["c.ts"], "c.ts": ["a.ts"] }, ["a.ts -> b.ts -> c.ts -> a.ts"]],
    ["a file importing itself", { "a.ts": ["a.ts"] }, ["a.ts -> a.ts"]],
  ])("dbaas imports - the cycle finder: %s", (_name, graph, expected) => {
    expect(cycles(graph)).toEqual(expected);
  });

  it("dbaas imports - the files of services/dbaas import in no cycle", () => {
    const graph = siblingImports(path.join(__dirname, "../../services/dbaas"));
    expect(graph["credential-actions.ts"]).toContain("app.ts"); // the reader sees type imports
    expect(cycles(graph)).toEqual([]);
  });
});
