/**
 * The image's node_modules made outside Docker, from this checkout's installed tree and its
 * package-lock.json, for builds that cannot reach the npm registry (scripts/image/build.sh with
 * IMAGE_DEPS=prebuilt; README "Operations: the image without a registry"):
 *   prod  — what `npm ci --omit=dev` installs: the closure of dependencies (+ optional ones)
 *   build — prod plus what `npm run build` needs: typescript and @types/*, with their closure
 *   tsx deploy/image/deps.ts OUT_DIR   →   OUT_DIR/prod-modules, OUT_DIR/build-modules
 */
import fs from "fs";
import path from "path";

type LockEntry = {
  dev?: boolean;
  optional?: boolean;
  link?: boolean;
  bin?: string | Record<string, string>;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
};
export type Lockfile = { lockfileVersion: number; packages: Record<string, LockEntry> };

/** Where Node finds `name` from the package installed at `from` (its own node_modules, then each parent's). */
export function resolveFrom(lock: Lockfile, from: string, name: string): string | undefined {
  let dir = from;
  for (;;) {
    const candidate = `${dir ? `${dir}/` : ""}node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (!dir) return undefined;
    const up = dir.lastIndexOf("/node_modules/");
    dir = up < 0 ? "" : dir.slice(0, up);
  }
}

/** Lockfile paths of every package a tree needs: `roots` (names the project depends on) and all they depend on. */
export function closure(lock: Lockfile, roots: readonly string[]): string[] {
  if (lock.lockfileVersion < 2) throw new Error(`package-lock.json version ${lock.lockfileVersion}: version 2 or later is needed`);
  const seen = new Set<string>();
  const visit = (from: string, name: string, optional: boolean) => {
    const at = resolveFrom(lock, from, name);
    if (!at) {
      if (optional) return; // an optional dependency npm skipped (another platform's binary)
      throw new Error(`package-lock.json has no ${name} for ${from || "the project"}`);
    }
    if (seen.has(at)) return;
    seen.add(at);
    const entry = lock.packages[at];
    for (const dep of Object.keys(entry.dependencies ?? {})) visit(at, dep, false);
    for (const dep of Object.keys(entry.optionalDependencies ?? {})) visit(at, dep, true);
    // npm 7+ installs peers; one that is missing was optional for the package that names it.
    for (const dep of Object.keys(entry.peerDependencies ?? {})) visit(at, dep, true);
  };
  for (const name of roots) visit("", name, false);
  return [...seen].sort();
}

export type DepsKind = "prod" | "build";

/** The root names of each tree: the project's dependencies; for the build, also the compiler and type packages. */
export function rootsOf(lock: Lockfile, kind: DepsKind): string[] {
  const project = lock.packages[""] ?? {};
  const prod = [...Object.keys(project.dependencies ?? {}), ...Object.keys(project.optionalDependencies ?? {})];
  if (kind === "prod") return prod;
  const build = Object.keys(project.devDependencies ?? {}).filter((name) => name === "typescript" || name.startsWith("@types/"));
  return [...prod, ...build];
}

function binsOf(entry: LockEntry, at: string): Record<string, string> {
  if (!entry.bin) return {};
  return typeof entry.bin === "string" ? { [at.slice(at.lastIndexOf("node_modules/") + 13)]: entry.bin } : entry.bin;
}

/** Copies the packages at `paths` from `root` into `out` (as its node_modules), each without its nested node_modules. */
export function copyTree(root: string, lock: Lockfile, paths: readonly string[], out: string): number {
  fs.rmSync(out, { recursive: true, force: true });
  let copied = 0;
  for (const at of paths) {
    const source = path.join(root, at);
    if (!fs.existsSync(source)) {
      if (lock.packages[at].optional) continue; // not installed on this platform
      throw new Error(`${at} is in package-lock.json but not installed in ${root}`);
    }
    const target = path.join(out, at.replace(/^node_modules\//, ""));
    const nested = path.join(source, "node_modules");
    fs.cpSync(source, target, { recursive: true, dereference: false, filter: (file) => file !== nested });
    copied++;
    // npm links the top-level packages' commands into node_modules/.bin (`npm run build` runs tsc).
    if (at.indexOf("/node_modules/") < 0)
      for (const [command, file] of Object.entries(binsOf(lock.packages[at], at))) {
        fs.mkdirSync(path.join(out, ".bin"), { recursive: true });
        fs.symlinkSync(path.posix.join("..", at.slice(13), file), path.join(out, ".bin", command));
      }
  }
  return copied;
}

if (require.main === module) {
  const out = process.argv[2];
  if (!out) throw new Error("usage: tsx deploy/image/deps.ts OUT_DIR");
  const root = path.resolve(__dirname, "../..");
  const lock = JSON.parse(fs.readFileSync(path.join(root, "package-lock.json"), "utf8")) as Lockfile;
  for (const kind of ["prod", "build"] as const) {
    const count = copyTree(root, lock, closure(lock, rootsOf(lock, kind)), path.join(out, `${kind}-modules`));
    console.log(`${kind}-modules: ${count} packages`);
  }
}
