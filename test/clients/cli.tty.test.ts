/**
 * The CLI on a terminal: `jobs run --wait` under tmux (a private server), read with
 * capture-pane: the live line shows the queue position and statusReason while the job waits,
 * then the coloured end line and the job's exit code. A job's output and a model's reply cannot
 * set the pane's title, write tmux's clipboard (OSC 52, accepted: set-clipboard on) or clear the
 * screen, unless `--raw`.
 */
import { execFileSync } from "child_process";
import { mkdtempSync, rmSync, writeFileSync } from "fs";
import os from "os";
import path from "path";
import { CiPlatform } from "../../clients/sdk/src";
import { OllamaStandin } from "../support/provider-standins";
import { gpuTestUser, http, ROOT, sandboxedGpuEnv, startTestPlatform, TestPlatform, uniqueName, waitFor } from "../support/platform";

/** A title write, a clipboard write (base64 of "pwned") and a screen clear, as a job or a model might print them. */
const HOSTILE = "\x1b]0;pwned-title\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J";
const SHOWN = "^[]0;pwned-title^G^[]52;c;cHduZWQ=^G^[[2J";

describe("clients cli tty - live progress on a terminal", () => {
  let platform: TestPlatform;
  let ollama: OllamaStandin;
  let sdk: CiPlatform;
  const work = mkdtempSync(path.join(os.tmpdir(), "cli-tty-"));
  const socket = uniqueName("cli_tty");
  const tmuxConf = path.join(work, "tmux.conf");
  writeFileSync(tmuxConf, "set -g set-clipboard on\n");
  const tmux = (...args: string[]) => execFileSync("tmux", ["-L", socket, "-f", tmuxConf, ...args], { encoding: "utf8" });
  const pane = (escapes = false, target = "cli") => tmux("capture-pane", "-p", ...(escapes ? ["-e"] : []), "-t", target);
  const cliEnv = () =>
    `env -u NO_COLOR -u CI_PLATFORM_URL TERM=xterm-256color XDG_CONFIG_HOME=${work}/cfg CI_PLATFORM_URL=${platform.baseUrl} CI_PLATFORM_API_KEY=${sdk.creds.token}`;
  const cliCommand = (args: string) => `${cliEnv()} ${process.execPath} ${path.join(ROOT, "bin/ci-platform.js")} ${args}`;

  beforeAll(async () => {
    ollama = await new OllamaStandin().start();
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "inference"],
      env: sandboxedGpuEnv(work, { OLLAMA_URL: ollama.url }),
    });
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
    await ollama?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("clients cli tty - jobs run --wait shows status, queue position and statusReason live, then the exit code", async () => {
    const holder = await sdk.submitJob({ command: "sleep 60" });
    await waitFor(async () => (await sdk.getJob(holder.id)).status === "running", { message: "the holder running" });
    const command = `${cliCommand("jobs run --wait -- 'echo done; exit 5'")}; echo "EXIT=$?"; sleep 120`;
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

  test("clients cli tty - jobs logs, logs -f and chat show a title write, an OSC 52 clipboard write and a screen clear instead of obeying them; --raw obeys", async () => {
    const job = await sdk.submitJob({ command: `printf '${HOSTILE.replaceAll("\x1b", "\\033").replaceAll("\x07", "\\007")}after-job\\n'` });
    await waitFor(async () => (await sdk.getJob(job.id)).status === "completed", { message: "the hostile job completed" });
    // Split mid-sequence: the CLI judges a sequence whole, whichever chunks it comes in.
    ollama.set({ chunks: ["from the model ", HOSTILE.slice(0, 9), HOSTILE.slice(9), "\x1b[3", "1mred\x1b[0m"] });
    const script = path.join(work, "neutralised.sh");
    writeFileSync(
      script,
      [
        "echo BEFORE-MARK",
        cliCommand(`jobs logs ${job.id}`),
        cliCommand(`jobs logs -f ${job.id}`),
        cliCommand("chat llama3.2:1b hi"),
        "echo ALL-DONE",
        "sleep 120",
      ].join("\n"),
    );
    tmux("new-session", "-d", "-s", "safe", "-x", "160", "-y", "20", `sh ${script}`);
    const shown = await waitFor(() => (pane(false, "safe").includes("ALL-DONE") ? pane(false, "safe") : undefined), {
      message: "the commands",
      timeoutMs: 30_000,
    });
    expect(shown).toContain("BEFORE-MARK"); // not cleared
    expect(shown.split(`${SHOWN}after-job`).length - 1).toBe(2); // logs and logs -f
    expect(shown).toContain(`from the model ${SHOWN}red`);
    expect(pane(true, "safe")).toContain("\x1b[31mred"); // colour still works
    expect(tmux("display-message", "-p", "-t", "safe", "#{pane_title}")).not.toContain("pwned-title");
    expect(tmux("list-buffers")).not.toContain("pwned");

    tmux("new-session", "-d", "-s", "raw", "-x", "160", "-y", "20", `echo BEFORE-MARK; ${cliCommand(`jobs logs --raw ${job.id}`)}; echo RAW-DONE; sleep 120`);
    const raw = await waitFor(() => (pane(false, "raw").includes("RAW-DONE") ? pane(false, "raw") : undefined), { message: "the raw logs", timeoutMs: 30_000 });
    expect(raw).not.toContain("BEFORE-MARK"); // cleared
    expect(tmux("display-message", "-p", "-t", "raw", "#{pane_title}").trim()).toBe("pwned-title");
    expect(tmux("list-buffers")).toContain('"pwned"');
  });
});
