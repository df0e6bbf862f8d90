/**
 * Dependencies point down (issue 26): no import cycle between the files of lib/, nor between the
 * files of one service. Type-only imports count too: a cycle of types is still two files that
 * cannot be read, or moved, one without the other.
 */
import fs from "fs";
import path from "path";
import ts from "typescript";
import { tsFilesUnder } from "../support/source-files";

const ROOT = path.resolve(__dirname, "../..");

/** The files of `dir` each file of it imports (relative imports that stay inside `dir`). */
function importGraph(dir: string): Map<string, string[]> {
  const files = new Set(tsFilesUnder(dir));
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const imported = ts.preProcessFile(fs.readFileSync(file, "utf8"), true, true).importedFiles.map((f) => f.fileName);
    const targets = imported
      .filter((spec) => spec.startsWith("."))
      .flatMap((spec) => [`${path.resolve(path.dirname(file), spec)}.ts`, path.resolve(path.dirname(file), spec, "index.ts")])
      .filter((target) => files.has(target));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Cycles found depth-first, as [a, b, a]: at least one wherever files import each other in a ring. */
function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const cycles: string[][] = [];
  const done = new Set<string>();
  const visit = (file: string, trail: string[]) => {
    const at = trail.indexOf(file);
    if (at >= 0) return void cycles.push([...trail.slice(at), file]);
    if (done.has(file)) return;
    for (const next of graph.get(file) ?? []) visit(next, [...trail, file]);
    done.add(file);
  };
  for (const file of [...graph.keys()].sort()) visit(file, []);
  return cycles;
}

describe("platform - import cycles", () => {
  it.each([
    ["none", { a: ["b"], b: [] }, []],
    ["two files", { a: ["b"], b: ["a"] }, [["a", "b", "a"]]],
    ["three files", { a: ["b"], b: ["c"], c: ["a"] }, [["a", "b", "c", "a"]]],
    ["a shared dependency is no cycle", { a: ["b", "c"], b: ["c"], c: [] }, []],
  ])("platform - cycles: %s", (_name, edges, expected) => {
    expect(cyclesOf(new Map(Object.entries(edges)))).toEqual(expected);
  });

  const groups = ["lib", ...fs.readdirSync(path.join(ROOT, "services")).map((s) => `services/${s}`)];
  it.each(groups)("platform - no import cycle between the files of %s", (group) => {
    const cycles = cyclesOf(importGraph(path.join(ROOT, group))).map((c) => c.map((f) => path.relative(ROOT, f)).join(" > "));
    expect(cycles).toEqual([]);
  });
});

describe("platform - layers of gpu-scheduler", () => {
  it("platform - gpu-scheduler's core/ (pure decisions) imports nothing of its other folders", () => {
    const folder = path.join(ROOT, "services/gpu-scheduler");
    const core = path.join(folder, "core");
    const outward = [...importGraph(folder)]
      .filter(([file]) => file.startsWith(core + path.sep))
      .flatMap(([file, targets]) =>
        targets
          .filter((t) => !t.startsWith(core + path.sep) && path.dirname(t) !== folder)
          .map((t) => `${path.relative(ROOT, file)} > ${path.relative(ROOT, t)}`),
      );
    expect(outward).toEqual([]);
  });
});
