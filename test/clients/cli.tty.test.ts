/**
 * The CLI on a terminal: `jobs run --wait` under tmux (a private server), read with
 * capture-pane: the live line shows the queue position and statusReason while the job waits,
 * then the coloured end line and the job's exit code.
 */
import { execFileSync } from "child_process";
import { mkdtempSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { CiPlatform } from "../../clients/sdk/src";
import { gpuTestUser, http, ROOT, sandboxedGpuEnv, startTestPlatform, TestPlatform, uniqueName, waitFor } from "../support/platform";

describe("clients cli tty - live progress on a terminal", () => {
  let platform: TestPlatform;
  let sdk: CiPlatform;
  const work = mkdtempSync(path.join(os.tmpdir(), "cli-tty-"));
  const socket = uniqueName("cli_tty");
  const tmux = (...args: string[]) => execFileSync("tmux", ["-L", socket, ...args], { encoding: "utf8" });
  const pane = (escapes = false) => tmux("capture-pane", "-p", ...(escapes ? ["-e"] : []), "-t", "cli");

  beforeAll(async () => {
    platform = await startTestPlatform({ services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"], env: sandboxedGpuEnv(work) });
    const token = await gpuTestUser(platform.baseUrl);
    const { apiKey } = (await http(platform.baseUrl, "POST", "/api/auth/api-keys", { token })).body;
    sdk = new CiPlatform({ baseUrl: platform.baseUrl, token: apiKey });
  });

  afterAll(async () => {
    try {
      tmux("kill-server");
    } catch {
      // already gone
    }
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("clients cli tty - jobs run --wait shows status, queue position and statusReason live, then the exit code", async () => {
    const holder = await sdk.submitJob({ command: "sleep 60" });
    await waitFor(async () => (await sdk.getJob(holder.id)).status === "running", { message: "the holder running" });
    const env = `env -u NO_COLOR -u CI_PLATFORM_URL TERM=xterm-256color XDG_CONFIG_HOME=${work}/cfg CI_PLATFORM_URL=${platform.baseUrl} CI_PLATFORM_API_KEY=${sdk.creds.token}`;
    const command = `${env} ${process.execPath} ${path.join(ROOT, "bin/ci-platform.js")} jobs run --wait -- 'echo done; exit 5'; echo "EXIT=$?"; sleep 120`;
    tmux("new-session", "-d", "-s", "cli", "-x", "160", "-y", "20", command);
    const waiting = await waitFor(() => /queued · queue position 1 · \S.*/.exec(pane())?.[0], { message: "the live queued line", timeoutMs: 20_000 });
    expect(waiting).toMatch(/queued · queue position 1 · .+/);
    await sdk.cancelJob(holder.id);
    const end = await waitFor(() => (pane().includes("EXIT=") ? pane() : undefined), { message: "the CLI to exit", timeoutMs: 20_000 });
    expect(end).toMatch(/job \S+ failed \(exit code 5\)/);
    expect(end).toContain("EXIT=5");
    // The live line was rewritten in place, not left behind as scrolled lines.
    expect(end).not.toContain("queue position");
    // Colour on a terminal: the status in red.
    expect(pane(true)).toContain("\x1b[31mfailed");
  });
});
