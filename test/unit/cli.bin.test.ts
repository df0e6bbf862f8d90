/**
 * bin/ci-platform.js runs the CLI's build (dist/cli/ci-platform.js) only while it is newer than
 * every source it was made from, else the sources through tsx: a stale build never answers. In a
 * copy of the layout whose two entry points say which of them ran.
 */
import { execFileSync } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";

const ROOT = path.join(__dirname, "../..");

describe("the CLI's launcher", () => {
  let dir: string;
  const ran = () => execFileSync(process.execPath, [path.join(dir, "bin/ci-platform.js")], { encoding: "utf8" }).trim();
  const write = (file: string, text: string, mtime: Date) => {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
    fs.utimesSync(path.join(dir, file), mtime, mtime);
  };
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "cli-bin-"));
    fs.mkdirSync(path.join(dir, "bin"));
    fs.copyFileSync(path.join(ROOT, "bin/ci-platform.js"), path.join(dir, "bin/ci-platform.js"));
    fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("cli bin - the build while it is newer than the CLI's and the SDK's sources; the sources once one of them is newer; the sources without a build", () => {
    write("clients/cli/src/main.ts", 'export async function main(): Promise<void> { console.log("sources"); }\n', at(10));
    write("clients/sdk/src/index.ts", "export {};\n", at(10));
    expect(ran()).toBe("sources");
    write("dist/cli/ci-platform.js", 'exports.main = async () => console.log("built");\n', at(20));
    expect(ran()).toBe("built");
    write("clients/sdk/src/nested/errors.ts", "export {};\n", at(30));
    expect(ran()).toBe("sources");
    fs.utimesSync(path.join(dir, "dist/cli/ci-platform.js"), at(40), at(40));
    expect(ran()).toBe("built");
    write("clients/cli/src/jobs.ts", "export {};\n", at(50));
    expect(ran()).toBe("sources");
  });
});
