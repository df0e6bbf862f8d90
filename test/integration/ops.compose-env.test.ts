/**
 * scripts/compose-env.sh: one step makes the compose project's .env (and .env.gateway) with every
 * secret random and no CHANGE-ME left, which both Compose implementations (Debian 12's docker-compose
 * 1.29 and `docker compose` v2) accept as it is and read the same way (`config`, offline); run again,
 * it keeps what is set.
 */
import { execFileSync, spawnSync } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import { parse } from "yaml";
import { canonicalConfig, ComposeCli, composeCommand } from "../support/compose-cli";
import { ROOT } from "../support/platform";

function projectCopy(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "compose-env-"));
  fs.copyFileSync(path.join(ROOT, "docker-compose.yml"), path.join(dir, "docker-compose.yml"));
  fs.cpSync(path.join(ROOT, "docker"), path.join(dir, "docker"), { recursive: true });
  return dir;
}

const run = (dir: string) => execFileSync("bash", [path.join(ROOT, "scripts/compose-env.sh")], { env: { ...process.env, PROJECT_DIR: dir }, encoding: "utf8" });
const values = (file: string) =>
  Object.fromEntries(
    fs
      .readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => /^[A-Z_0-9]+=/.test(l))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );

describe("ops compose env - one script, no CHANGE-ME left", () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

  test("ops compose env - random secrets, files 0600, accepted by both Composes' config alike; a second run keeps them", () => {
    const [a, b] = [projectCopy(), projectCopy()];
    dirs.push(a, b);
    expect(run(a)).toContain("ready");
    run(b);
    const env = values(path.join(a, ".env"));
    const gateway = values(path.join(a, ".env.gateway"));
    expect(JSON.stringify({ env, gateway })).not.toContain("CHANGE-ME");
    for (const key of ["JWT_SECRET", "POSTGRES_PASSWORD", "TENANT_PG_PASSWORD", "NATS_PASSWORD_AUTH", "CALLER_VERIFY_KEY"]) {
      expect(env[key]).toMatch(/^\S{20,}$/);
      expect(values(path.join(b, ".env"))[key]).not.toBe(env[key]);
    }
    expect(gateway.CALLER_SIGNING_KEY).toMatch(/^\S{20,}$/);
    for (const file of [".env", ".env.gateway"]) expect(fs.statSync(path.join(a, file)).mode & 0o777).toBe(0o600);
    expect(fs.existsSync(path.join(a, "docker/nats-tls/server.pem"))).toBe(true);
    const [v1, v2] = (["v1", "v2"] as ComposeCli[]).map((cli) => {
      const config = spawnSync(...composeCommand(cli, ["-f", "docker-compose.yml", "config"]), {
        cwd: a,
        encoding: "utf8",
        env: { PATH: process.env.PATH ?? "" },
      });
      expect({ cli, status: config.status, stderr: config.stderr }).toEqual({ cli, status: 0, stderr: "" });
      return canonicalConfig(parse(config.stdout));
    });
    // The generated values (base64 keys among them) mean the same to both: no `$`, which only v2 would expand.
    expect(v2).toEqual(v1);
    expect(v2.services["api-gateway"].environment.CALLER_SIGNING_KEY).toBe(gateway.CALLER_SIGNING_KEY);
    run(a);
    expect(values(path.join(a, ".env"))).toEqual(env);
    expect(values(path.join(a, ".env.gateway"))).toEqual(gateway);
  });
});
