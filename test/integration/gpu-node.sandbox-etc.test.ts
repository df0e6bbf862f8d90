/**
 * The sandbox's /etc (services/gpu-node/sandbox-etc.ts): one folder per node of the host's safe
 * entries, as far as every user may read them, and the node's minimal passwd and group; and what a
 * real sandboxed job sees of it.
 */
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "fs";
import os from "os";
import path from "path";
import { ProcessExecutor } from "../../services/gpu-node/process-executor";
import { SAFE_ETC } from "../../services/gpu-node/sandbox";
import { sandboxEtc } from "../../services/gpu-node/sandbox-etc";
import { simulatedCard, testSandbox } from "../support/sandbox";
import { uniqueName } from "../support/platform";

const mode = (file: string) => lstatSync(file).mode & 0o777;

describe("gpu-node sandbox /etc", () => {
  let source: string;
  beforeAll(() => {
    source = mkdtempSync(path.join(os.tmpdir(), "etc-source-"));
    writeFileSync(path.join(source, "os-release"), "ID=debian\n", { mode: 0o644 });
    writeFileSync(path.join(source, "timezone"), "Etc/UTC\n", { mode: 0o640 }); // not for every user: left out
    symlinkSync("/usr/share/zoneinfo/Etc/UTC", path.join(source, "localtime"));
    mkdirSync(path.join(source, "ssl", "certs"), { recursive: true });
    mkdirSync(path.join(source, "ssl", "private"));
    chmodSync(path.join(source, "ssl", "private"), 0o700);
    writeFileSync(path.join(source, "ssl", "private", "key.pem"), "SECRET", { mode: 0o600 });
    writeFileSync(path.join(source, "ssl", "certs", "ca.pem"), "CERT", { mode: 0o444 });
    writeFileSync(path.join(source, "shadow"), "root:SECRET", { mode: 0o644 }); // readable, but not a safe entry
  });
  afterAll(() => rmSync(source, { recursive: true, force: true }));

  test("gpu-node sandbox /etc - the safe entries every user may read, symlinks as they are, the minimal passwd and group; nothing else", async () => {
    const dir = await sandboxEtc(65534, 65534, source);
    expect(mode(dir)).toBe(0o755);
    expect(readdirSync(dir).sort()).toEqual(["group", "localtime", "os-release", "passwd", "ssl"]);
    expect(readFileSync(path.join(dir, "os-release"), "utf8")).toBe("ID=debian\n");
    expect(readlinkSync(path.join(dir, "localtime"))).toBe("/usr/share/zoneinfo/Etc/UTC");
    expect(readdirSync(path.join(dir, "ssl"))).toEqual(["certs"]);
    expect([mode(path.join(dir, "ssl")), mode(path.join(dir, "ssl", "certs")), mode(path.join(dir, "ssl", "certs", "ca.pem"))]).toEqual([0o755, 0o755, 0o644]);
    expect(readFileSync(path.join(dir, "passwd"), "utf8")).toBe("root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n");
    // Made once per node process: the next job binds the same folder.
    expect(await sandboxEtc(65534, 65534, source)).toBe(dir);
  });

  test("gpu-node sandbox /etc - a sandboxed job sees the host's safe entries read-only, and no secret", async () => {
    const logDir = mkdtempSync(path.join(os.tmpdir(), "gpu-node-etc-"));
    try {
      const executor = new ProcessExecutor(() => ({ timeoutS: 30, graceS: 1, logDir }), testSandbox());
      const command =
        "ls -A /etc; touch /etc/x 2>/dev/null && echo WROTE; ls /etc/ssl/private 2>/dev/null && echo PRIVATE; cat /etc/shadow 2>/dev/null; echo end";
      const outcome = await executor.run({ jobId: uniqueName("job"), card: simulatedCard("GPU-sim-etc-0"), command }).outcome;
      expect(outcome).toMatchObject({ type: "finished", exitCode: 0 });
      const lines = outcome!.output.trim().split("\n");
      const hostSafe = SAFE_ETC.filter((entry) => lstatSafe(path.join("/etc", entry)));
      expect(lines.slice(0, -1).sort()).toEqual([...hostSafe, "group", "passwd"].sort());
      expect(lines.at(-1)).toBe("end");
    } finally {
      rmSync(logDir, { recursive: true, force: true });
    }
  });
});

function lstatSafe(file: string): boolean {
  try {
    return Boolean(lstatSync(file));
  } catch {
    return false;
  }
}
