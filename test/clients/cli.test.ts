/**
 * The `ci-platform` CLI as a real child process (bin/ci-platform.js) against a platform in this
 * process: a simulated card running sandboxed processes, dbaas on the tenant PostgreSQL, an
 * Ollama stand-in. Each test's config lives in its own XDG_CONFIG_HOME.
 */
import { execFile, spawn } from "child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "fs";
import os from "os";
import path from "path";
import { promisify } from "util";
import { CiPlatform } from "../../clients/sdk/src";
import { replicaCommand } from "../fixtures/deployments/replica";
import { OllamaStandin } from "../support/provider-standins";
import { relayEnv, ROOT, sandboxedGpuEnv, startTestPlatform, TestPlatform, uniqueName, waitFor, waitForRoute } from "../support/platform";

type Run = { code: number | null; stdout: string; stderr: string };

describe("clients cli - ci-platform as a process", () => {
  let platform: TestPlatform;
  let ollama: OllamaStandin;
  const work = mkdtempSync(path.join(os.tmpdir(), "cli-"));
  const home = path.join(work, "home");
  const config = path.join(home, ".config-xdg");
  const configFile = path.join(config, "ci-platform", "config.json");
  const email = `${uniqueName("cli")}@example.com`;
  const password = "correct horse battery";

  /** Starts the CLI; `onStdout` sees each chunk as it arrives. */
  function start(args: string[], opts: { input?: string; env?: Record<string, string>; onStdout?: (chunk: string) => void } = {}): Promise<Run> {
    const env: Record<string, string | undefined> = { ...process.env, HOME: home, XDG_CONFIG_HOME: config, NO_COLOR: "1", ...opts.env };
    for (const name of ["CI_PLATFORM_URL", "CI_PLATFORM_API_KEY"]) if (!opts.env?.[name]) delete env[name];
    const child = spawn(process.execPath, [path.join(ROOT, "bin/ci-platform.js"), ...args], { cwd: work, env, stdio: ["pipe", "pipe", "pipe"] });
    const run: Run = { code: null, stdout: "", stderr: "" };
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      run.stdout += d;
      opts.onStdout?.(d);
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => (run.stderr += d));
    child.stdin.end(opts.input ?? "");
    return new Promise((resolve) => child.once("close", (code) => resolve({ ...run, code })));
  }
  const cli = (...args: string[]) => start(args);
  const json = async (...args: string[]) => {
    // Before the arguments: anything after `--` belongs to the job's command.
    const res = await cli("--json", ...args);
    if (res.code !== 0) throw new Error(`${args.join(" ")}: ${res.code} ${res.stderr}`);
    return JSON.parse(res.stdout);
  };
  const storedConfig = () => JSON.parse(readFileSync(configFile, "utf8"));
  const sdk = () => new CiPlatform({ baseUrl: platform.baseUrl, token: storedConfig().apiKey });

  beforeAll(async () => {
    for (const method of ["log", "warn", "error"] as const) jest.spyOn(console, method).mockImplementation(() => undefined);
    ollama = await new OllamaStandin().start();
    platform = await startTestPlatform({
      services: ["api-gateway", "auth", "gpu-scheduler", "gpu-node", "dbaas", "inference", "usage"],
      // The node's relay (jobs with platformAccess run only with one): the tenant server and a platform URL (this file's jobs never call it).
      env: sandboxedGpuEnv(work, { OLLAMA_URL: ollama.url, DEPLOYMENTS_TICK_MS: "200", ...relayEnv("http://127.0.0.1:3000") }),
    });
    for (const route of ["/api/gpu/status", "/api/databases", "/api/models"]) await waitForRoute(platform.baseUrl, "GET", route);
    const reg = await start(["register", "--url", platform.baseUrl, "--email", email, "--name", "CLI", "--password-stdin"], { input: `${password}\n` });
    expect([reg.code, reg.stderr]).toEqual([0, expect.stringContaining(`Logged in to ${platform.baseUrl} as ${email}`)]);
    await waitFor(async () => (await sdk().clusterStatus()).cluster.totalGpus === 1, { message: "the simulated card" });
  });

  afterAll(async () => {
    await platform?.stop();
    await ollama?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("clients cli - register and login store the URL and a working API key in a 0600 file under XDG_CONFIG_HOME", async () => {
    expect(statSync(configFile).mode & 0o777).toBe(0o600);
    expect(storedConfig()).toMatchObject({ url: platform.baseUrl, apiKey: expect.stringMatching(/^ci_[a-z0-9]{32}$/) });
    const before = storedConfig().apiKey;
    const login = await start(["login", "--email", email, "--password-stdin"], { input: password });
    expect(login.code).toBe(0);
    // A password login makes a new key (the old one stops working) and stores it.
    expect(storedConfig().apiKey).not.toBe(before);
    expect((await sdk().me()).email).toBe(email);
    const byKey = await cli("login", "--api-key", storedConfig().apiKey, "--json");
    expect(JSON.parse(byKey.stdout)).toMatchObject({ email, url: platform.baseUrl });
  });

  test("clients cli - a wrong password or key is a clear error, exit 1, and the stored login is unchanged", async () => {
    const stored = readFileSync(configFile, "utf8");
    const wrong = await start(["login", "--email", email, "--password-stdin"], { input: "not the password" });
    expect([wrong.code, wrong.stderr]).toEqual([1, expect.stringMatching(/^error: .+\(\w+, HTTP 401\)\n$/)]);
    const badKey = await cli("login", "--api-key", "ci_" + "0".repeat(32));
    expect([badKey.code, badKey.stderr]).toEqual([1, expect.stringContaining("UNAUTHORIZED")]);
    expect(readFileSync(configFile, "utf8")).toBe(stored);
    // The environment overrides the file.
    const overridden = await start(["jobs", "ls"], { env: { CI_PLATFORM_API_KEY: "ci_" + "1".repeat(32) } });
    expect([overridden.code, overridden.stderr]).toEqual([1, expect.stringContaining("HTTP 401")]);
    const nowhere = await start(["jobs", "ls"], { env: { XDG_CONFIG_HOME: path.join(work, "empty") } });
    expect([nowhere.code, nowhere.stderr]).toEqual([2, expect.stringContaining("No platform URL")]);
  });

  test("clients cli - jobs run --wait --follow streams the output as it is printed and exits with the job's exit code", async () => {
    let runningAtFirstLine: string | undefined;
    let firstChunk: Promise<unknown> | undefined;
    const res = await start(
      ["jobs", "run", "--wait", "--follow", "--env", "GREETING=hello", "--", 'echo "$GREETING 1"; sleep 0.6; echo "$GREETING 2"; exit 3'],
      {
        onStdout: () => {
          // At the first output the job must still be running: streamed, not printed at its end.
          firstChunk ??= sdk()
            .listJobs()
            .then(({ jobs }) => (runningAtFirstLine = jobs[0].status));
        },
      },
    );
    await firstChunk;
    expect(runningAtFirstLine).toBe("running");
    expect(res.stdout).toBe("hello 1\nhello 2\n");
    expect(res.code).toBe(3);
    expect(res.stderr).toContain("failed (exit code 3)");
    expect((await cli("jobs", "run", "--wait", "--", "true")).code).toBe(0);
  });

  test("clients cli - jobs run runs the words after -- as that argv: sh -c 'echo hello; exit 3' prints hello and exits 3", async () => {
    const res = await cli("jobs", "run", "--wait", "--follow", "--", "sh", "-c", "echo hello; exit 3");
    expect([res.code, res.stdout]).toEqual([3, "hello\n"]);
    const odd = ["a b", "it's", 'say "hi"', "$HOME", "`id`", "line\nbreak", "", "*", "~"];
    const printed = await cli("jobs", "run", "--wait", "--follow", "--", "printf", "[%s]\\n", ...odd);
    expect([printed.code, printed.stdout]).toEqual([0, odd.map((word) => `[${word}]\n`).join("")]);
    // Not a terminal (a pipe, a file): the output's bytes as they are.
    const escapes = await cli("jobs", "run", "--wait", "--follow", "--", "printf", "\\033]0;title\\007\\033[2J");
    expect(escapes.stdout).toBe("\x1b]0;title\x07\x1b[2J");
  });

  test("clients cli - --json output parses: jobs run, get, ls, logs; gpus, models ls, usage", async () => {
    const { id } = await json("jobs", "run", "--", "echo", "from", "json");
    await waitFor(async () => (await json("jobs", "get", id)).status === "completed", { message: "the job completed" });
    expect(await json("jobs", "get", id)).toMatchObject({ id, command: "echo from json", result: { exitCode: 0 } });
    expect((await json("jobs", "ls")).map((j: { id: string }) => j.id)).toContain(id);
    expect((await cli("jobs", "logs", id)).stdout).toBe("from json\n");
    expect((await json("gpus")).cluster.totalGpus).toBe(1);
    expect((await json("models", "ls")).map((m: { name: string }) => m.name)).toContain("llama3.2:1b");
    expect((await json("usage")).gpu.jobs).toBeGreaterThanOrEqual(1);
  });

  test("clients cli - jobs run --array N --wait runs every job and exits 0; --after waits for a job and fails with it", async () => {
    const array = await cli("jobs", "run", "--array", "3", "--parallelism", "1", "--wait", "--", "echo $CI_ARRAY_INDEX");
    expect(array.code).toBe(0);
    const arrayId = array.stdout.trim();
    expect((await sdk().getArray(arrayId)).counts).toEqual({ completed: 3 });
    // The dependency fails only once the dependant waits on it (no race with a slow machine): it runs
    // when a blocker has finished, which the test cancels once the dependant is in.
    const blocker = await json("jobs", "run", "--", "sleep", "600");
    const first = await json("jobs", "run", "--after", `${blocker.id}:finished`, "--", "sh", "-c", "exit 4");
    const waiting = cli("jobs", "run", "--after", first.id, "--wait", "--", "true");
    const dependsOnFirst = (j: { dependsOn?: Array<{ jobId?: string }> }) => j.dependsOn?.some((d) => d.jobId === first.id);
    await waitFor(async () => (await json("jobs", "ls")).some(dependsOnFirst), { message: "the dependant submitted" });
    expect((await cli("jobs", "cancel", blocker.id)).code).toBe(0);
    const after = await waiting;
    expect(after.code).toBe(130); // cancelled: its dependency failed
    expect((await sdk().getJob(first.id)).status).toBe("failed");
    // Submitted once the dependency has failed: refused at once (400), nothing submitted.
    const late = await cli("jobs", "run", "--after", first.id, "--", "true");
    expect([late.code, late.stderr]).toEqual([1, expect.stringContaining("would never run")]);
    expect((await cli("jobs", "run", "--after", `${first.id}:started`, "--", "true")).code).toBe(2);
  });

  test("clients cli - db create, ls, psql (no connection string printed by psql's run), rm", async () => {
    const created = await json("db", "create", "--max-storage-mb", "64");
    expect(created.connectionString).toContain(created.password);
    expect((await json("db", "ls")).map((d: { id: string }) => d.id)).toContain(created.id);
    const psql = await cli("db", "psql", created.id, "--", "-Atc", "select current_user");
    expect([psql.code, psql.stdout.trim()]).toEqual([0, created.username]);
    expect(psql.stdout + psql.stderr).not.toContain(created.password);
    const failing = await cli("db", "psql", created.id, "--", "-Atc", "select * from no_such_table");
    expect(failing.code).not.toBe(0);
    expect((await cli("db", "rm", created.id)).code).toBe(0);
    expect((await json("db", "ls")).map((d: { id: string }) => d.id)).not.toContain(created.id);
    expect(storedConfig().databases?.[created.id]).toBeUndefined();
    const gone = await cli("db", "get", created.id);
    expect([gone.code, gone.stderr]).toEqual([1, expect.stringContaining("NOT_FOUND")]);
  });

  test("clients cli - db rotate keeps the new connection for psql; db snapshot, snapshots ls/get/rm; keys create --save", async () => {
    const created = await json("db", "create");
    const rotated = await json("db", "rotate", created.id);
    expect(rotated.password).not.toBe(created.password);
    expect(storedConfig().databases[created.id]).toBe(rotated.connectionString);
    expect((await cli("db", "psql", created.id, "--", "-Atc", "select 7")).stdout.trim()).toBe("7");
    const snapshot = await json("db", "snapshot", created.id);
    expect(snapshot.status).toMatch(/^(pending|ready)$/);
    expect((await json("snapshots", "ls")).snapshots.map((n: { id: string }) => n.id)).toContain(snapshot.id);
    expect((await json("snapshots", "get", snapshot.id)).databaseId).toBe(created.id);
    await waitFor(async () => (await json("snapshots", "get", snapshot.id)).status !== "pending", { timeoutMs: 30_000, message: "the snapshot taken" });
    expect((await cli("snapshots", "rm", snapshot.id)).code).toBe(0);
    expect((await cli("snapshots", "get", snapshot.id)).stderr).toContain("HTTP 404");
    expect((await json("db", "get", created.id)).id).toBe(created.id);
    expect((await cli("db", "rm", created.id)).code).toBe(0);
    const old = storedConfig().apiKey;
    const key = await start(["--json", "keys", "create", "--email", email, "--password-stdin", "--save"], { input: password });
    expect(JSON.parse(key.stdout).apiKey).toBe(storedConfig().apiKey);
    expect(storedConfig().apiKey).not.toBe(old);
    expect((await cli("jobs", "ls")).code).toBe(0);
  });

  test("clients cli - jobs logs -f follows a running job to its end; jobs cancel; npx ci-platform runs the package's bin", async () => {
    const { id } = await json("jobs", "run", "--", "echo first; sleep 0.5; echo second");
    const followed = await cli("jobs", "logs", id, "-f");
    expect([followed.code, followed.stdout]).toEqual([0, "first\nsecond\n"]);
    const long = await json("jobs", "run", "--", "sleep 60");
    expect((await json("jobs", "cancel", long.id)).id).toBe(long.id);
    await waitFor(async () => (await json("jobs", "get", long.id)).status === "cancelled", { message: "cancelled" });
    // Asynchronously: the platform serving it runs in this process.
    const viaNpx = await promisify(execFile)("npx", ["--no-install", "ci-platform", "--json", "gpus"], {
      cwd: ROOT,
      env: { ...process.env, XDG_CONFIG_HOME: config, CI_PLATFORM_URL: "", CI_PLATFORM_API_KEY: "" },
    });
    expect(JSON.parse(viaNpx.stdout).cluster.totalGpus).toBe(1);
  });

  test("clients cli - deploy create|ls|get|rm: a model deployment by its name; a malformed --env sends nothing", async () => {
    const name = `cli-${Date.now().toString(36)}`;
    const bad = await cli("deploy", "create", "--name", name, "--command", "serve", "--port", "8000", "--env", "NOEQUALS");
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining("--env takes NAME=value")]);
    const made = await json("deploy", "create", "--name", name, "--command", "serve --port 8000", "--port", "8000", "--env", "A=1", "--max-replicas", "2");
    expect(made).toMatchObject({ name, model: name, status: "idle", maxReplicas: 2, envNames: ["A"] });
    expect((await cli("deployments", "ls")).stdout).toMatch(new RegExp(`${made.id}.*${name}.*idle.*0/0`));
    expect((await cli("deploy", "get", made.id)).stdout).toContain("0 ready, 0 starting, 0 desired");
    expect((await cli("deploy", "rm", made.id)).code).toBe(0);
    expect((await cli("deploy", "get", made.id)).code).toBe(1);
  });

  test("clients cli - deploy create --wait: the status line while its replica starts (plain lines off a terminal), then ready; get NAME --wait; rm NAME", async () => {
    const name = `cli-wait-${Date.now().toString(36)}`;
    const command = replicaCommand(8000, { REPLICA_TAG: "cli" });
    const made = await cli("deploy", "create", "--name", name, "--command", command, "--port", "8000", "--min-replicas", "1", "--wait");
    expect(made.code).toBe(0);
    const lines = made.stderr.trim().split("\n");
    // One line per change, none repeated: starting from the first read (it keeps a replica), then ready.
    expect(lines[0]).toMatch(new RegExp(`^${name} starting · 0 ready, [01] starting, 1 desired`));
    expect(lines[lines.length - 1]).toBe(`${name} ready · 1 ready, 0 starting, 1 desired`);
    expect(new Set(lines).size).toBe(lines.length);
    expect(made.stdout).toMatch(/status\s+ready/);
    // Named by its name; already ready: one line, at once.
    const again = await cli("deploy", "get", name, "--wait");
    expect([again.code, again.stderr.trim()]).toEqual([0, `${name} ready · 1 ready, 0 starting, 1 desired`]);
    expect((await cli("deploy", "get", "no-such-deployment")).stderr).toContain('No deployment named "no-such-deployment"');
    expect((await cli("deploy", "rm", name)).code).toBe(0);
    expect((await cli("deployments", "ls")).stdout).not.toContain(name);
  });

  test("clients cli - tokens create prints a working cit_ token once; tokens ls shows it without the secret; tokens rm revokes it", async () => {
    const args = ["tokens", "create", "--email", email, "--password-stdin", "--name", "nightly eval", "--scopes", "inference,usage:read"];
    const made = await start(["--json", ...args, "--models", "llama3.2:1b", "--expires-in", "3600", "--max-credits", "5"], { input: password });
    const created = JSON.parse(made.stdout);
    expect(created).toMatchObject({
      token: expect.stringMatching(/^cit_[a-z0-9]{32}$/),
      scopes: ["inference", "usage:read"],
      models: ["llama3.2:1b"],
      maxCredits: 5,
    });
    expect(made.stderr).toContain("Shown once");
    const asToken = new CiPlatform({ baseUrl: platform.baseUrl, token: created.token });
    expect((await asToken.me()).email).toBe(email);
    expect(await asToken.listJobs().catch((e) => e.status)).toBe(403);
    const plain = await start(args, { input: password });
    expect(plain.stdout).toMatch(/^cit_[a-z0-9]{32}\n$/);
    const listed = await json("tokens", "ls");
    expect(listed.find((t: { id: string }) => t.id === created.id)).toMatchObject({ name: "nightly eval", maxCredits: 5, jobId: null });
    expect(JSON.stringify(listed)).not.toContain(created.token.slice(4));
    const table = await cli("tokens", "ls");
    expect(table.stdout).toMatch(new RegExp(`${created.id}.*nightly eval.*inference,usage:read.*0/5`));
    expect(table.stdout + table.stderr).not.toContain("cit_");
    expect((await cli("tokens", "rm", created.id)).code).toBe(0);
    await waitFor(async () => (await asToken.me().catch((e) => e.status)) === 401, { message: "the deleted token refused" });
    expect((await json("tokens", "ls")).map((t: { id: string }) => t.id)).not.toContain(created.id);
  });

  test("clients cli - schedules create prints its next run; ls lists it; a bad cron is exit 1 naming the field; rm deletes it", async () => {
    const created = await json(
      "schedules",
      "create",
      "--name",
      "nightly",
      "--cron",
      "30 2 * * *",
      "--tz",
      "Europe/Berlin",
      "--preemptible",
      "--",
      "echo",
      "nightly run",
    );
    expect(created).toMatchObject({ name: "nightly", cron: "30 2 * * *", timezone: "Europe/Berlin", concurrency: "forbid" });
    expect(created.job).toMatchObject({ command: "echo 'nightly run'", preemptible: true });
    expect((await json("schedules", "ls")).map((x: { id: string }) => x.id)).toContain(created.id);
    const table = await cli("schedules", "ls");
    expect(table.stdout).toMatch(new RegExp(`${created.id}.*nightly.*30 2 \\* \\* \\*.*Europe/Berlin`));
    const bad = await cli("schedules", "create", "--name", "x", "--cron", "61 * * * *", "--", "true");
    expect([bad.code, bad.stderr]).toEqual([1, expect.stringContaining("cron")]);
    expect((await cli("schedules", "rm", created.id)).code).toBe(0);
    expect((await json("schedules", "ls")).map((x: { id: string }) => x.id)).not.toContain(created.id);
  });

  test("clients cli - jobs run --platform-access: the job's token is listed with its jobId and limits; the detail shows the access, never a secret", async () => {
    const db = await json("db", "create");
    const { id } = await json("jobs", "run", "--platform-access", `inference,db:${db.id}`, "--", "sleep 60");
    const access = { scopes: ["inference", "databases:write"], databases: [db.id] };
    expect((await json("jobs", "get", id)).platformAccess).toEqual(access);
    const issued = await waitFor(async () => (await json("tokens", "ls")).find((t: { jobId: string }) => t.jobId === id) ?? false, {
      message: "the job's token",
    });
    expect(issued).toMatchObject({ ...access, models: null });
    expect((await cli("tokens", "ls")).stdout).toMatch(new RegExp(`${issued.id}.*inference,databases:write.*${id}`));
    const shown = await cli("jobs", "get", id);
    expect(shown.stdout).toMatch(/platformAccess +\{"scopes":\["inference","databases:write"\]/);
    expect(shown.stdout).not.toContain("cit_");
    await json("jobs", "cancel", id);
    expect((await cli("db", "rm", db.id)).code).toBe(0);
  });

  test("clients cli - batch submit --wait shows completed/total and ends completed; batch output prints the answers by custom_id", async () => {
    const file = path.join(work, "requests.jsonl");
    const line = (id: string) =>
      JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model: "llama3.2:1b", messages: [{ role: "user", content: id }] } });
    writeFileSync(file, ["a", "b", "c"].map(line).join("\n"));
    const res = await cli("batch", "submit", file, "--wait");
    expect([res.code, res.stderr]).toEqual([0, expect.stringMatching(/^batch_\S+ completed 3\/3$/m)]);
    expect(res.stdout).toMatch(/^status +completed$/m);
    const id = /^id +(batch_\S+)$/m.exec(res.stdout)![1];
    const output = await cli("batch", "output", id);
    expect(
      output.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).custom_id)
        .sort(),
    ).toEqual(["a", "b", "c"]);
    writeFileSync(file, '{"custom_id": "x", "url": "/v1/images"}');
    expect(await cli("batch", "submit", file)).toMatchObject({ code: 2, stderr: expect.stringContaining("its first line must be a request") });
  });

  test("clients cli - chat streams a reply, from an argument or from stdin", async () => {
    expect((await cli("chat", "llama3.2:1b", "hi")).stdout).toBe("Hello, world!\n");
    const piped = await start(["chat", "llama3.2:1b"], { input: "a prompt on stdin" });
    expect([piped.code, piped.stdout]).toEqual([0, "Hello, world!\n"]);
    expect(ollama.requests.at(-1)?.body.messages.at(-1).content).toBe("a prompt on stdin");
    const unknown = await cli("chat", "no-such-model", "hi");
    expect([unknown.code, unknown.stderr]).toEqual([1, expect.stringContaining("HTTP 404")]);
  });

  test("clients cli - chat --tool prints the answer's tool call as one; --json-schema asks for that schema (strict)", async () => {
    const tool = path.join(work, "weather.json");
    const params = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
    writeFileSync(tool, JSON.stringify({ name: "get_weather", description: "The weather in a city", parameters: params }));
    ollama.set({ chunks: [], toolCalls: [{ name: "get_weather", arguments: '{"city":"Oslo"}' }], completionTokens: 9 });
    const called = await cli("chat", "llama3.2:1b", "Weather in Oslo?", "--tool", tool);
    ollama.set({});
    expect([called.code, called.stdout, called.stderr]).toEqual([0, 'tool call: get_weather({"city":"Oslo"})\n', ""]);
    expect(ollama.requests.at(-1)?.body.tools).toEqual([{ type: "function", function: expect.objectContaining({ name: "get_weather", parameters: params }) }]);
    const unknown = await cli("chat", "no-such-model", "hi", "--tool", tool);
    expect([unknown.code, unknown.stderr]).toEqual([1, expect.stringContaining("(model_not_found, HTTP 404)")]);
    const schemaFile = path.join(work, "city.schema.json");
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false };
    writeFileSync(schemaFile, JSON.stringify(schema));
    const shaped = await cli("chat", "llama3.2:1b", "A city?", "--json-schema", schemaFile);
    expect([shaped.code, shaped.stdout]).toEqual([0, "Hello, world!\n"]);
    // Ollama gets the schema as its `format` (services/inference/providers/ollama.ts).
    expect(ollama.requests.at(-1)?.body.format).toEqual(schema);
  });

  test("clients cli - chat with a missing or invalid --tool / --json-schema file: a clear error, exit 2, nothing sent", async () => {
    writeFileSync(path.join(work, "broken.json"), "{ not json");
    writeFileSync(path.join(work, "nameless.json"), JSON.stringify({ description: "no name" }));
    const sent = ollama.requests.length;
    const cases: Array<[string[], string]> = [
      [["--json-schema", "no-such-file.json"], "--json-schema: cannot read no-such-file.json (ENOENT)"],
      [["--json-schema", "broken.json"], "--json-schema: broken.json is not JSON"],
      [["--tool", "no-such-file.json"], "--tool: cannot read no-such-file.json (ENOENT)"],
      [["--tool", "nameless.json"], "--tool: nameless.json must hold a function tool"],
    ];
    for (const [args, message] of cases) {
      const res = await cli("chat", "llama3.2:1b", "hi", ...args);
      expect([args.join(" "), res.code, res.stderr]).toEqual([args.join(" "), 2, expect.stringContaining(message)]);
    }
    expect(ollama.requests.length).toBe(sent);
  });

  test("clients cli - bad input: a clear message, a non-zero exit, and nothing submitted", async () => {
    const before = (await json("jobs", "ls")).length;
    const tokensBefore = (await sdk().listTokens()).tokens.length;
    const create = ["tokens", "create", "--email", email, "--password-stdin", "--name", "t"];
    const cases: Array<[string[], number, string]> = [
      [["jobs", "run", "--gpus", "0", "--", "echo"], 1, "VALIDATION_FAILED"],
      [["jobs", "run", "--timeout", "-5", "--", "echo"], 1, "VALIDATION_FAILED"],
      [["jobs", "run", "--wait"], 2, "No command"],
      [["jobs", "run", "--env", "NOEQUALS", "--", "echo"], 2, "--env wants NAME=VALUE"],
      [["jobs", "run", "--priority", "urgent", "--", "echo"], 2, "Invalid values"],
      [["jobs", "get", "not-a-job"], 1, "NOT_FOUND"],
      [["db", "psql", "00000000-0000-0000-0000-000000000000"], 2, "No stored password"],
      [["frobnicate"], 2, "error:"],
      [["jobs", "run", "--platform-access", "inference,admin", "--", "echo"], 2, 'unknown scope "admin"'],
      [["jobs", "run", "--platform-access", "db:not-an-id", "--", "echo"], 2, "is not a database id"],
      [[...create, "--scopes", "inference,"], 2, "an empty entry"],
      [[...create, "--scopes", "jobs:admin"], 2, "unknown scope"],
      [[...create, "--scopes", "inference", "--expires-in", "10"], 2, "--expires-in"],
      [[...create, "--scopes", "inference", "--max-credits", "-1"], 2, "--max-credits"],
      [["tokens", "rm", "00000000-0000-0000-0000-000000000000"], 1, "NOT_FOUND"],
      [["jobs", "ls", "--url", "ftp://example.com"], 2, "Not an http(s) URL"],
    ];
    for (const [args, code, message] of cases) {
      const res = await cli(...args);
      expect([args.join(" "), res.code, res.stderr]).toEqual([args.join(" "), code, expect.stringContaining(message)]);
    }
    expect((await json("jobs", "ls")).length).toBe(before);
    expect((await sdk().listTokens()).tokens.length).toBe(tokensBefore);
  });
});
