/** The SDK's and the CLI's pure pieces: SSE parsing, URLs, `--env`, exit codes, libpq settings, bars, the config file. */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from "fs";
import os from "os";
import path from "path";
import { buildUrl, sseMessages } from "../../clients/sdk/src";
import { configFile, readConfig, resolveTarget, writeConfig } from "../../clients/cli/src/config";
import { platformAccess, tokenRequest } from "../../clients/cli/src/access";
import { libpqEnv } from "../../clients/cli/src/db";
import { afterDependency, parseEnv } from "../../clients/cli/src/jobs";
import { jobExitCode } from "../../clients/cli/src/job-wait";
import { bar } from "../../clients/cli/src/output";
import type { Job } from "../../clients/sdk/src";

/** A response whose body arrives in exactly these chunks. */
const chunked = (chunks: string[]) =>
  new Response(
    new ReadableStream({
      start(c) {
        for (const chunk of chunks) c.enqueue(new TextEncoder().encode(chunk));
        c.close();
      },
    }),
  );

async function messages(chunks: string[]) {
  const out = [];
  for await (const m of sseMessages(chunked(chunks))) out.push(m);
  return out;
}

describe("clients pieces - SSE parsing", () => {
  const cases: Array<[string, string[], Array<{ event?: string; data: string }>]> = [
    ["one data event", ['data: {"a":1}\n\n'], [{ event: undefined, data: '{"a":1}' }]],
    ["an event split across chunks, mid-line", ["event: sta", 'tus\ndata: {"x"', ":2}\n", "\n"], [{ event: "status", data: '{"x":2}' }]],
    ["keep-alive comments are skipped", [": keep-alive\n\n", "data: 1\n\n", ": keep-alive\n\n"], [{ event: undefined, data: "1" }]],
    [
      "CRLF line ends",
      ["data: a\r\n\r\ndata: b\r\n\r\n"],
      [
        { event: undefined, data: "a" },
        { event: undefined, data: "b" },
      ],
    ],
    ["multi-line data joins with newlines", ["data: a\ndata: b\n\n"], [{ event: undefined, data: "a\nb" }]],
    ["an unfinished event at the end is not one", ["data: 1\n\ndata: 2"], [{ event: undefined, data: "1" }]],
  ];
  test.each(cases)("clients pieces - %s", async (_name, chunks, expected) => {
    expect(await messages(chunks)).toEqual(expected);
  });

  test("clients pieces - a multi-byte character split between chunks decodes whole", async () => {
    const bytes = new TextEncoder().encode("data: €\n\n");
    const body = new ReadableStream({
      start(c) {
        c.enqueue(bytes.slice(0, 7)); // inside the euro sign's three bytes
        c.enqueue(bytes.slice(7));
        c.close();
      },
    });
    const out = [];
    for await (const m of sseMessages(new Response(body))) out.push(m.data);
    expect(out).toEqual(["€"]);
  });
});

describe("clients pieces - URLs", () => {
  const cases: Array<[string, string, Parameters<typeof buildUrl>[2], string]> = [
    ["a path parameter", "/api/gpu/jobs/{id}", { path: { id: "abc" } }, "http://h:1/api/gpu/jobs/abc"],
    [
      "a hostile id stays one segment",
      "/api/gpu/jobs/{id}",
      { path: { id: "../../admin/nodes?x=1#f" } },
      "http://h:1/api/gpu/jobs/..%2F..%2Fadmin%2Fnodes%3Fx%3D1%23f",
    ],
    [
      "query values, undefined left out",
      "/api/gpu/jobs/{id}/logs",
      { path: { id: "j" }, query: { follow: true, attempt: undefined } },
      "http://h:1/api/gpu/jobs/j/logs?follow=true",
    ],
  ];
  test.each(cases)("clients pieces - %s", (_name, template, init, expected) => {
    expect(buildUrl("http://h:1", template, init)).toBe(expected);
  });
  test("clients pieces - a missing path parameter throws before any request", () => {
    expect(() => buildUrl("http://h:1", "/api/gpu/jobs/{id}", {})).toThrow("Missing path parameter id");
  });
});

describe("clients pieces - CLI decisions", () => {
  test.each([
    ["pairs", ["A=1", "B=x=y", "EMPTY="], { A: "1", B: "x=y", EMPTY: "" }],
    ["none", [], {}],
  ] as Array<[string, string[], Record<string, string>]>)("clients pieces - --env %s", (_name, pairs, expected) => {
    expect(parseEnv(pairs)).toEqual(expected);
  });
  test.each([["NOEQUALS"], ["=value"]])("clients pieces - --env %s is refused", (pair) => {
    expect(() => parseEnv([pair])).toThrow("--env wants NAME=VALUE");
  });

  test.each([
    ["j1", { jobId: "j1", condition: "succeeded" }],
    ["j1:failed", { jobId: "j1", condition: "failed" }],
    ["j1:finished", { jobId: "j1", condition: "finished" }],
    ["array:a1", { arrayId: "a1", condition: "succeeded" }],
    ["array:a1:finished", { arrayId: "a1", condition: "finished" }],
  ])("clients pieces - --after %s", (value, expected) => {
    expect(afterDependency(value)).toEqual(expected);
  });
  test.each([[""], ["j1:started"], ["j1:failed:x"], ["array:"]])("clients pieces - --after %j is refused", (value) => {
    expect(() => afterDependency(value)).toThrow("--after wants");
  });

  const DB = "39BD8187-1111-4222-8333-444455556666";
  test.each([
    ["scopes only", "inference,jobs:read", { scopes: ["inference", "jobs:read"] }],
    ["a database adds databases:write", `inference,db:${DB}`, { scopes: ["inference", "databases:write"], databases: [DB.toLowerCase()] }],
    ["a model alone adds inference", "model:llama3.2:1b", { scopes: ["inference"], models: ["llama3.2:1b"] }],
    ["repeats once", "usage:read, usage:read", { scopes: ["usage:read"] }],
  ])("clients pieces - --platform-access %s", (_name, text, expected) => {
    expect(platformAccess(text)).toEqual(expected);
  });
  test.each([
    ["inference,admin", 'unknown scope "admin"'],
    ["inference,", "an empty entry"],
    ["db:42", '"42" is not a database id'],
    ["model:", "model: needs a model id"],
  ])("clients pieces - --platform-access %s is refused", (text, message) => {
    expect(() => platformAccess(text)).toThrow(message);
  });
  test.each([
    [{ name: "", scopes: "inference" }, "--name"],
    [{ name: "x".repeat(65), scopes: "inference" }, "--name"],
    [{ name: "n", scopes: "inference", databases: "x" }, "--databases"],
    [{ name: "n", scopes: "inference", expiresIn: 59 }, "--expires-in"],
    [{ name: "n", scopes: "inference", expiresIn: 90.5 }, "--expires-in"],
    [{ name: "n", scopes: "inference", maxCredits: NaN }, "--max-credits"],
  ])("clients pieces - tokens create %j is refused", (args, message) => {
    expect(() => tokenRequest(args)).toThrow(message);
  });
  test("clients pieces - tokens create's body", () => {
    const args = { name: " eval ", scopes: "inference", models: "a,b", databases: DB, expiresIn: 60, maxCredits: 0 };
    expect(tokenRequest(args)).toEqual({
      name: "eval",
      scopes: ["inference"],
      models: ["a", "b"],
      databases: [DB.toLowerCase()],
      expiresInSeconds: 60,
      maxCredits: 0,
    });
  });

  const job = (status: Job["status"], exitCode?: number | null) => ({ status, result: exitCode === undefined ? null : { exitCode, output: "" } }) as Job;
  test.each([
    ["completed", job("completed", 0), 0],
    ["failed with its code", job("failed", 3), 3],
    ["failed without a code (timeout, node lost)", job("failed", null), 1],
    ["failed with no result", job("failed"), 1],
    ["cancelled", job("cancelled", 137), 130],
  ] as Array<[string, Job, number]>)("clients pieces - exit code: %s", (_name, j, code) => {
    expect(jobExitCode(j)).toBe(code);
  });

  test("clients pieces - libpq environment from a connection string (encoded parts decoded, sslmode kept)", () => {
    expect(libpqEnv("postgresql://user_1:p%40ss%2Fw@db.example:6543/client_x?sslmode=require")).toEqual({
      PGHOST: "db.example",
      PGPORT: "6543",
      PGUSER: "user_1",
      PGPASSWORD: "p@ss/w",
      PGDATABASE: "client_x",
      PGSSLMODE: "require",
    });
  });

  test.each([
    [0, 100, "░░░░░░░░░░"],
    [50, 100, "█████░░░░░"],
    [150, 100, "██████████"],
    [5, 0, "░░░░░░░░░░"],
    [-3, 100, "░░░░░░░░░░"],
  ])("clients pieces - bar(%d, %d)", (value, total, expected) => {
    expect(bar(value, total)).toBe(expected);
  });
});

describe("clients pieces - the config file", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "cli-config-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("clients pieces - XDG_CONFIG_HOME, else HOME/.config", () => {
    expect(configFile({ XDG_CONFIG_HOME: "/x", HOME: "/h" })).toBe("/x/ci-platform/config.json");
    expect(configFile({ HOME: "/h" })).toBe("/h/.config/ci-platform/config.json");
  });

  test("clients pieces - written 0600 even over a file that was world-readable; the environment overrides it", () => {
    const env = { XDG_CONFIG_HOME: dir };
    mkdirSync(path.join(dir, "ci-platform"), { recursive: true });
    writeFileSync(configFile(env), "{}", { mode: 0o644 });
    writeConfig({ url: "http://a", apiKey: "ci_file" }, env);
    expect(statSync(configFile(env)).mode & 0o777).toBe(0o600);
    expect(readConfig(env)).toEqual({ url: "http://a", apiKey: "ci_file" });
    expect(resolveTarget(env)).toEqual({ url: "http://a", apiKey: "ci_file" });
    expect(resolveTarget({ ...env, CI_PLATFORM_URL: "http://b", CI_PLATFORM_API_KEY: "ci_env" })).toEqual({ url: "http://b", apiKey: "ci_env" });
  });

  test("clients pieces - a broken file is a clear error, not a crash", () => {
    const env = { XDG_CONFIG_HOME: path.join(dir, "broken") };
    mkdirSync(path.dirname(configFile(env)), { recursive: true });
    writeFileSync(configFile(env), "{not json");
    expect(() => readConfig(env)).toThrow(/is not valid JSON/);
    expect(readFileSync(configFile(env), "utf8")).toBe("{not json");
  });
});
