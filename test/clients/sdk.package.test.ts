/**
 * The SDK from its packed tarball (npm pack, then npm install --offline into a new project), used
 * from plain Node as CommonJS and as ESM against the real platform behind a reverse proxy under a
 * path prefix, and type-checked as TypeScript (nodenext) with this repository's tsc. Retries,
 * Retry-After, timeouts and the typed errors against a scripted server.
 */
import { rmSync, writeFileSync } from "fs";
import path from "path";
import { installPackedSdk, prefixProxy, runNode, scriptedServer, Served, typecheck } from "../support/sdk-package";
import { startTestPlatform, TestPlatform, uniqueName, waitForRoute } from "../support/platform";

/** What a user's program does with the SDK (`sdk`: the module, however it was loaded); prints one JSON line. */
const PROGRAM = `
async function main([proxied, scripted, email]) {
  const out = {};
  const anonymous = new sdk.CiPlatform({ baseUrl: proxied });
  const { accessToken } = await anonymous.register({ email, name: "Packed SDK", password: "correct horse battery" });
  const client = anonymous.withToken(accessToken);
  out.me = (await client.me()).email;
  const caught = async (p) => p.then(() => null, (e) => e);
  const missing = await caught(client.deleteToken("00000000-0000-0000-0000-000000000000"));
  out.notFound = [missing instanceof sdk.NotFoundError, missing instanceof sdk.ApiError, missing instanceof sdk.CiPlatformError, missing.status, missing.code, typeof missing.requestId];
  out.unauthenticated = (await caught(client.withToken("ci_" + "0".repeat(32)).me())) instanceof sdk.AuthenticationError;
  const who = process.argv[1].endsWith(".mjs") ? "esm" : "cjs";
  const fast = { baseUrl: scripted, initialDelayMs: 10 };
  out.retried = (await new sdk.CiPlatform({ ...fast, token: "flaky-" + who }).me()).email;
  const post = await caught(new sdk.CiPlatform({ ...fast, token: "broken-" + who }).createApiKey());
  out.postNotRetried = [post instanceof sdk.InternalServerError, post.status];
  const get = await caught(new sdk.CiPlatform({ ...fast, token: "broken-get-" + who, maxRetries: 1 }).me());
  out.getRetried = get.status;
  const slow = await caught(new sdk.CiPlatform({ ...fast, token: "silent-" + who, timeoutMs: 300, maxRetries: 0 }).me());
  out.timeout = [slow instanceof sdk.TimeoutError, slow.timeoutMs];
  const down = await caught(new sdk.CiPlatform({ baseUrl: "http://127.0.0.1:9/behind/proxy", maxRetries: 0 }).me());
  out.connection = [down instanceof sdk.ConnectionError, down.message];
  console.log(JSON.stringify(out));
}
main(process.argv.slice(2)).catch((err) => { console.error(err); process.exit(1); });
`;

/** TypeScript users, ESM and CommonJS: the declarations type calls and refuse wrong ones. */
const TS_USE = `
const client = new CiPlatform({ baseUrl: "http://localhost:3000/ci", timeoutMs: 5000, maxRetries: 3 });
export const job: Promise<Job> = client.getJob("id");
// @ts-expect-error: a job id is a string
client.getJob(42);
// @ts-expect-error: no such route
client.api("get", "/api/no-such-route", {});
export const status: Promise<number> = client.me().then(
  () => 200,
  (e: unknown) => (e instanceof NotFoundError ? e.status : 0),
);
`;

describe("clients sdk package - the packed tarball in a new project", () => {
  let platform: TestPlatform;
  let proxy: Served;
  let scripted: Awaited<ReturnType<typeof scriptedServer>>;
  let project: string;

  beforeAll(async () => {
    ({ project } = installPackedSdk());
    writeFileSync(path.join(project, "use.cjs"), `const sdk = require("@ci-platform/sdk");\n${PROGRAM}`);
    writeFileSync(path.join(project, "use.mjs"), `import * as sdk from "@ci-platform/sdk";\n${PROGRAM}`);
    platform = await startTestPlatform({ services: ["api-gateway", "auth"] });
    await waitForRoute(platform.baseUrl, "GET", "/api/auth/me");
    proxy = await prefixProxy(platform.baseUrl, "/behind/proxy");
    scripted = await scriptedServer();
  });

  afterAll(async () => {
    await proxy?.close();
    await scripted?.close();
    await platform?.stop();
    if (project) rmSync(path.dirname(project), { recursive: true, force: true });
  });

  test.each(["use.cjs", "use.mjs"])("clients sdk package - %s: plain Node, the platform under a path prefix, typed errors, retries, timeouts", async (file) => {
    const who = file.endsWith(".mjs") ? "esm" : "cjs";
    const email = `${uniqueName("pkg")}@example.com`;
    const out = await runNode(project, file, [`${proxy.url}/behind/proxy`, scripted.url, email]);
    expect(out.me).toBe(email);
    expect(out.notFound).toEqual([true, true, true, 404, "NOT_FOUND", "string"]);
    expect(out.unauthenticated).toBe(true);
    // 503 (Retry-After: 1), 429 (Retry-After: 0), then the answer: three tries, the first wait the server's second.
    expect(out.retried).toBe(`flaky-${who}@example.com`);
    const flaky = scripted.hits.get(`flaky-${who}`)!;
    expect(flaky).toHaveLength(3);
    expect(flaky[1].at - flaky[0].at).toBeGreaterThanOrEqual(950);
    // A POST without an Idempotency-Key is tried once on a 502; a GET is tried again.
    expect(out.postNotRetried).toEqual([true, 502]);
    expect(scripted.hits.get(`broken-${who}`)).toHaveLength(1);
    expect(out.getRetried).toBe(502);
    expect(scripted.hits.get(`broken-get-${who}`)).toHaveLength(2);
    expect(out.timeout).toEqual([true, 300]);
    expect(out.connection).toEqual([true, expect.stringContaining("http://127.0.0.1:9/behind/proxy/api/auth/me")]);
  });

  test("clients sdk package - TypeScript (nodenext), ESM and CommonJS: the declarations type every call; a wrong one fails to compile", () => {
    writeFileSync(path.join(project, "use-esm.mts"), `import { CiPlatform, NotFoundError, type Job } from "@ci-platform/sdk";\n${TS_USE}`);
    writeFileSync(path.join(project, "use-cjs.cts"), `import { CiPlatform, NotFoundError, type Job } from "@ci-platform/sdk";\n${TS_USE}`);
    const checked = typecheck(project, ["use-esm.mts", "use-cjs.cts"]);
    expect(checked).toEqual({ ok: true, output: "" });
    // The check can fail: a call the declarations refuse.
    writeFileSync(path.join(project, "wrong.mts"), `import { CiPlatform } from "@ci-platform/sdk";\nnew CiPlatform({ baseUrl: "x" }).getJob(42);\n`);
    const wrong = typecheck(project, ["wrong.mts"]);
    expect(wrong.ok).toBe(false);
    expect(wrong.output).toContain("wrong.mts");
  });
});
