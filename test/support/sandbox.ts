/**
 * Helpers of the job-isolation tests: the sandbox a test node uses, host-side views of a job's
 * processes, and a job image with busybox's whole tool set (nc, ps) imported without a registry.
 */
import { execFileSync, execSync } from "child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, copyFileSync, mkdirSync, chmodSync, writeFileSync } from "fs";
import os from "os";
import path from "path";
import type { NodeCard } from "../../services/gpu-node/discovery";
import { findBwrap, ProcessIsolation } from "../../services/gpu-node/process-executor";

export type SandboxIsolation = ProcessIsolation & { kind: "sandbox" };

export function testSandbox(overrides: Partial<SandboxIsolation> = {}): SandboxIsolation {
  const bwrap = findBwrap();
  if (!bwrap) throw new Error("bwrap is not installed: .ci/setup.d/25-bubblewrap.sh installs it");
  return { kind: "sandbox", bwrap, uid: 65534, gid: 65534, limits: { processes: 256, memoryBytes: 1 << 30, tmpBytes: 64 << 20 }, ...overrides };
}

/** A simulated card for executor tests and benches (no device nodes are bound for it). */
export function simulatedCard(uuid: string): NodeCard {
  return { uuid, index: 0, name: "Test GPU", memoryTotal: 1024, memoryUsed: 0, utilization: 0, temperature: 30, simulated: true };
}

function isZombie(pid: number): boolean {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z";
}

/** Host pids (seen from outside any namespace) whose command line is exactly `argv`. */
export function hostPidsRunning(argv: string[]): number[] {
  const wanted = `${argv.join("\0")}\0`;
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8") === wanted && !isZombie(Number(pid));
      } catch {
        return false;
      }
    })
    .map(Number);
}

export const FULL_BUSYBOX_IMAGE = process.env.TEST_JOB_IMAGE_FULL || "ci-platform/test-busybox-full:latest";

const APPLETS = [
  "sh",
  "cat",
  "ls",
  "ps",
  "env",
  "id",
  "echo",
  "grep",
  "head",
  "tr",
  "true",
  "false",
  "sleep",
  "wc",
  "dd",
  "touch",
  "nc",
  "printf",
  "test",
  "[",
];

/** The busybox image with nc and ps (the default test image has neither); built once, locally. */
export function ensureFullBusyboxImage(): string {
  try {
    execFileSync("docker", ["image", "inspect", FULL_BUSYBOX_IMAGE], { stdio: "ignore" });
    return FULL_BUSYBOX_IMAGE;
  } catch {
    // not there yet
  }
  const rootfs = mkdtempSync(path.join(os.tmpdir(), "busybox-full-"));
  try {
    for (const dir of ["bin", "tmp", "etc", "proc", "dev", "sys"]) mkdirSync(path.join(rootfs, dir));
    chmodSync(path.join(rootfs, "tmp"), 0o1777);
    copyFileSync("/bin/busybox", path.join(rootfs, "bin/busybox"));
    chmodSync(path.join(rootfs, "bin/busybox"), 0o755);
    for (const applet of APPLETS) symlinkSync("busybox", path.join(rootfs, "bin", applet));
    writeFileSync(path.join(rootfs, "etc/passwd"), "root:x:0:0:root:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n");
    writeFileSync(path.join(rootfs, "etc/group"), "root:x:0:\nnogroup:x:65534:\n");
    execSync(`tar -C ${JSON.stringify(rootfs)} -c . | docker import --change 'ENV PATH=/bin' - ${FULL_BUSYBOX_IMAGE}`, { stdio: "ignore" });
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
  return FULL_BUSYBOX_IMAGE;
}
