/**
 * deploy/image/deps.ts: which packages of package-lock.json go into the image's node_modules when
 * it is made outside Docker — what `npm ci --omit=dev` would install, plus the compiler for the
 * build stage. Tables over a small lockfile, and the project's own lockfile.
 */
import fs from "fs";
import path from "path";
import { closure, Lockfile, resolveFrom, rootsOf } from "../../deploy/image/deps";

const lock: Lockfile = {
  lockfileVersion: 3,
  packages: {
    "": { dependencies: { app: "1" }, optionalDependencies: { fast: "1" }, devDependencies: { typescript: "5", "@types/node": "20", jest: "30" } },
    "node_modules/app": { dependencies: { glob: "^7" }, peerDependencies: { "peer-present": "1", "peer-absent": "1" } },
    "node_modules/app/node_modules/glob": { dependencies: { once: "1" } },
    "node_modules/glob": { dev: true },
    "node_modules/once": {},
    "node_modules/peer-present": {},
    "node_modules/fast": { optionalDependencies: { "fast-linux": "1", "fast-darwin": "1" } },
    "node_modules/fast-linux": { optional: true },
    "node_modules/typescript": { dev: true },
    "node_modules/@types/node": { dev: true, dependencies: { "undici-types": "6" } },
    "node_modules/undici-types": { dev: true },
    "node_modules/jest": { dev: true, dependencies: { glob: "^13" } },
  },
};

const PROD = [
  "node_modules/app",
  "node_modules/app/node_modules/glob",
  "node_modules/fast",
  "node_modules/fast-linux",
  "node_modules/once",
  "node_modules/peer-present",
];

describe("ops - image dependencies made outside Docker", () => {
  it.each<[string, string, string, string | undefined]>([
    ["a nested copy wins over the top-level one", "node_modules/app", "glob", "node_modules/app/node_modules/glob"],
    ["a nested package finds its parent's siblings", "node_modules/app/node_modules/glob", "once", "node_modules/once"],
    ["the project finds top-level packages", "", "glob", "node_modules/glob"],
    ["a package npm did not install is not found", "node_modules/fast", "fast-darwin", undefined],
  ])("ops - resolve: %s", (_name, from, name, expected) => {
    expect(resolveFrom(lock, from, name)).toBe(expected);
  });

  it.each<[string, "prod" | "build", string[]]>([
    ["prod: dependencies, optional ones installed here, present peers; no dev package", "prod", PROD],
    [
      "build: prod plus typescript and @types with their closure; not jest",
      "build",
      [...PROD, "node_modules/typescript", "node_modules/@types/node", "node_modules/undici-types"].sort(),
    ],
  ])("ops - closure: %s", (_name, kind, expected) => {
    expect(closure(lock, rootsOf(lock, kind))).toEqual(expected);
  });

  it("ops - a required dependency missing from the lockfile stops it, naming it", () => {
    const broken: Lockfile = { lockfileVersion: 3, packages: { "": { dependencies: { gone: "1" } } } };
    expect(() => closure(broken, rootsOf(broken, "prod"))).toThrow("package-lock.json has no gone for the project");
    expect(() => closure({ lockfileVersion: 1, packages: {} }, [])).toThrow(/version 2 or later/);
  });

  it("ops - on the project's lockfile: exactly the packages npm marks as not dev", () => {
    const real = JSON.parse(fs.readFileSync(path.resolve(__dirname, "../../package-lock.json"), "utf8")) as Lockfile;
    const prod = closure(real, rootsOf(real, "prod"));
    const notDev = Object.entries(real.packages)
      .filter(([at, entry]) => at && !entry.dev && !entry.link && (!entry.optional || fs.existsSync(path.resolve(__dirname, "../..", at))))
      .map(([at]) => at);
    expect(prod.filter((at) => fs.existsSync(path.resolve(__dirname, "../..", at)))).toEqual(notDev.sort());
    for (const dev of ["node_modules/jest", "node_modules/typescript", "node_modules/eslint"]) expect(prod).not.toContain(dev);
    expect(closure(real, rootsOf(real, "build"))).toContain("node_modules/typescript");
  });
});
