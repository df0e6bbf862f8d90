/**
 * The CLI as people expect a CLI to behave (issue 33, as docker and kubectl do), as a real child
 * process against a platform in this process (one simulated card running sandboxed processes):
 * argv kept exactly, a failed job's reason and exit code, Ctrl-C while waiting, short id prefixes,
 * `--version`, completion scripts, profiles, `whoami`, `logout`, and an unreachable URL named.
 */
import { spawn } from "child_process";
import { mkdtempSync, readFileSync, rmSync } from "fs";
import os from "os";
import path from "path";
import { CiPlatform } from "../../clients/sdk/src";
import { ROOT, sandboxedGpuEnv, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";

type Run = { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string };
type Started = { done: Promise<Run>; output: () => Run; signal: (s: NodeJS.Signals) => void };

describe("clients cli - behaves like docker and kubectl", () => {
  let platform: TestPlatform;
  let sdk: CiPlatform;
  let apiKey: string;
  const work = mkdtempSync(path.join(os.tmpdir(), "cli-usability-"));
  const config = path.join(work, "xdg");
  const configFile = path.join(config, "ci-platform", "config.json");
  const email = `${uniqueName("cli-u")}@example.com`;

  function start(args: string[], env: Record<string, string> = {}): Started {
    const childEnv: Record<string, string | undefined> = { ...process.env, HOME: work, XDG_CONFIG_HOME: config, NO_COLOR: "1", ...env };
    for (const name of ["CI_PLATFORM_URL", "CI_PLATFORM_API_KEY", "CI_PLATFORM_PROFILE", "SHELL"]) if (!env[name]) delete childEnv[name];
    const child = spawn(process.execPath, [path.join(ROOT, "bin/ci-platform.js"), ...args], { cwd: work, env: childEnv, stdio: ["pipe", "pipe", "pipe"] });
    const run: Run = { code: null, signal: null, stdout: "", stderr: "" };
    child.stdout.setEncoding("utf8").on("data", (d: string) => (run.stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (run.stderr += d));
    child.stdin.end();
    return {
      done: new Promise((resolve) => child.once("close", (code, signal) => resolve({ ...run, code, signal }))),
      output: () => run,
      signal: (s) => child.kill(s),
    };
  }
  const cli = (args: string[], env: Record<string, string> = {}) => start(args, env).done;
  const stored = () => JSON.parse(readFileSync(configFile, "utf8"));

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    platform = await startTestPlatform({ services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node"], env: sandboxedGpuEnv(work) });
    for (const route of ["/api/gpu/status", "/api/auth/me"]) await waitForRoute(platform.baseUrl, "GET", route);
    const anonymous = new CiPlatform({ baseUrl: platform.baseUrl });
    const { accessToken } = await anonymous.register({ email, name: "Usability", password: "correct horse battery" });
    apiKey = (await anonymous.withToken(accessToken).createApiKey()).apiKey;
    sdk = new CiPlatform({ baseUrl: platform.baseUrl, token: apiKey });
    const login = await cli(["login", "--url", platform.baseUrl, "--api-key", apiKey]);
    expect(login.code).toBe(0);
    await waitFor(async () => (await sdk.clusterStatus()).cluster.totalGpus === 1, { message: "the simulated card" });
  });

  afterAll(async () => {
    await platform?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("clients cli - the words after -- reach the job exactly: spaces, quotes, $, * and apostrophes", async () => {
    const words = ["a   b", "$HOME", "*", "it's", '"q"', "x;y", "", "--"];
    const res = await cli(["jobs", "run", "--wait", "--", "printf", "[%s]\\n", ...words]);
    expect(res.code).toBe(0);
    const id = /job (\S+) submitted/.exec(res.stderr)![1];
    expect(await sdk.jobLogs(id)).toBe(words.map((w) => `[${w}]\n`).join(""));
  });

  test("clients cli - a failed job prints its reason and exits with its code; one that never ran exits 1 with the platform's reason", async () => {
    const exits = await cli(["jobs", "run", "--wait", "--", "sh", "-c", "exit 7"]);
    expect([exits.code, exits.stderr]).toEqual([7, expect.stringMatching(/job \S+ failed \(exit code 7\)/)]);
    const timedOut = await cli(["jobs", "run", "--wait", "--timeout", "1", "--", "sleep", "30"]);
    const id = /job (\S+) submitted/.exec(timedOut.stderr)![1];
    const job = await sdk.getJob(id);
    expect(job.errorMessage).toEqual(expect.any(String));
    expect(timedOut.code).not.toBe(0);
    expect(timedOut.stderr).toContain(`: ${job.errorMessage}`);
  });

  test("clients cli - Ctrl-C while following: the job goes on and the CLI says how to re-attach; with --cancel-on-interrupt it is cancelled", async () => {
    for (const cancel of [false, true]) {
      const run = start(["jobs", "run", "--follow", ...(cancel ? ["--cancel-on-interrupt"] : []), "--", "sh", "-c", "echo started; sleep 60"]);
      await waitFor(() => run.output().stdout.includes("started"), { timeoutMs: 20_000, message: "the job's first line" });
      const id = /job (\S+) submitted/.exec(run.output().stderr)![1];
      run.signal("SIGINT");
      const res = await run.done;
      expect(res.code).toBe(130);
      if (cancel) {
        expect(res.stderr).toContain(`job ${id} cancelled`);
        expect((await sdk.getJob(id)).status).toBe("cancelled");
      } else {
        expect(res.stderr).toContain(`job ${id} is still running. Re-attach: ci-platform jobs logs -f ${id}`);
        expect((await sdk.getJob(id)).status).toBe("running");
        await sdk.cancelJob(id);
      }
    }
  });

  test("clients cli - a job's id prefix (as the console shows it) works for get, logs and cancel; an unknown one is the platform's 404", async () => {
    const { id } = await sdk.submitJob({ command: "echo short" });
    await sdk.waitForJob(id);
    const got = await cli(["--json", "jobs", "get", id.slice(0, 8)]);
    expect([got.code, JSON.parse(got.stdout).id]).toEqual([0, id]);
    expect((await cli(["jobs", "logs", id.slice(0, 8)])).stdout).toBe("short\n");
    const unknown = await cli(["jobs", "get", "ffffffff"]);
    expect([unknown.code, unknown.stderr]).toEqual([1, expect.stringContaining("HTTP 404")]);
  });

  test("clients cli - arrays get counts an array's jobs by status; arrays cancel stops the rest; another's array is 404", async () => {
    const created = await sdk.submitArray({ command: "sleep 60", arrayCount: 3, arrayParallelism: 1 });
    const got = await cli(["--json", "arrays", "get", created.arrayId]);
    expect([got.code, JSON.parse(got.stdout)]).toEqual([0, expect.objectContaining({ id: created.arrayId, total: 3, jobIds: created.jobIds })]);
    const cancelled = await cli(["--json", "arrays", "cancel", created.arrayId]);
    expect(cancelled.code).toBe(0);
    await waitFor(async () => (await sdk.getArray(created.arrayId)).counts.cancelled === 3, { timeoutMs: 20_000, message: "every job of the array cancelled" });
    const shown = await cli(["arrays", "get", created.arrayId]);
    expect(shown.stdout).toMatch(/cancelled\s+3/);
    const unknown = await cli(["arrays", "get", "00000000-0000-4000-8000-000000000000"]);
    expect([unknown.code, unknown.stderr]).toEqual([1, expect.stringContaining("HTTP 404")]);
  });

  test("clients cli - --version, and completion scripts for bash and zsh", async () => {
    const { version } = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8"));
    expect((await cli(["--version"])).stdout.trim()).toBe(version);
    const bash = await cli(["completion"], { SHELL: "/bin/bash" });
    expect([bash.code, bash.stdout]).toEqual([0, expect.stringContaining("complete -o bashdefault -o default -F _ci-platform_yargs_completions ci-platform")]);
    const zsh = await cli(["completion"], { SHELL: "/usr/bin/zsh" });
    expect([zsh.code, zsh.stdout]).toEqual([0, expect.stringContaining("#compdef ci-platform")]);
  });

  test("clients cli - profiles: each its own URL and key; whoami and logout act on one; a bad name is a usage error", async () => {
    const staging = await cli(["--profile", "staging", "login", "--url", platform.baseUrl, "--api-key", apiKey]);
    expect(staging.code).toBe(0);
    expect(stored()).toMatchObject({ url: platform.baseUrl, apiKey, profiles: { staging: { url: platform.baseUrl, apiKey } } });
    const who = await cli(["whoami"], { CI_PLATFORM_PROFILE: "staging" });
    expect([who.code, who.stdout]).toEqual([0, `${email} (Usability) on ${platform.baseUrl}, profile staging\n`]);
    expect((await cli(["logout", "--profile", "staging"])).code).toBe(0);
    expect(stored().profiles.staging).toEqual({ url: platform.baseUrl });
    expect(stored().apiKey).toBe(apiKey); // the default profile keeps its key
    const out = await cli(["whoami", "--profile", "staging"]);
    expect([out.code, out.stderr]).toEqual([2, expect.stringContaining("ci-platform --profile staging login")]);
    expect((await cli(["--json", "whoami"])).stdout).toContain(`"profile":"default"`);
    const bad = await cli(["--profile", "../x", "whoami"]);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining("Not a profile name")]);
  });

  test("clients cli - a platform it cannot reach: the URL named, exit 1", async () => {
    const res = await cli(["--url", "http://127.0.0.1:1/prefix", "gpus"]);
    expect([res.code, res.stderr]).toEqual([1, expect.stringContaining("cannot reach the platform at http://127.0.0.1:1/prefix")]);
  });
});
