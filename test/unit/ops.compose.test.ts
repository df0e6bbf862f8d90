/**
 * docker-compose.yml: valid for both Compose implementations the stack supports (Debian 12's
 * docker-compose 1.29 and Compose v2's `docker compose`, .ci/setup.d/41-docker-compose.sh; `config`,
 * offline, in a copy of the project with .env made from .env.example, as an operator does), read the
 * same way by both, and complete: every service in its own container with health check and restart
 * policy, NATS with JetStream flushing every write, gpu-node with the NVIDIA reservation, the tenant
 * pooler (PgBouncer) with its role made by the tenant server's first start, secrets only from the env file.
 */
import { spawnSync } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import { parse } from "yaml";
import { SERVICE_REGISTRY } from "../../moleculer.config";
import { canonicalConfig, ComposeCli, composeCommand } from "../support/compose-cli";

const ROOT = path.resolve(__dirname, "../..");
const COMPOSE = path.join(ROOT, "docker-compose.yml");
const compose = parse(fs.readFileSync(COMPOSE, "utf8"), { merge: true });
const envExample = fs.readFileSync(path.join(ROOT, ".env.example"), "utf8");
const CLIS: ComposeCli[] = ["v1", "v2"];

/** `args` through `cli`; a clean environment, so only .env may supply the variables. */
function runCompose(cli: ComposeCli, args: string[], cwd = ROOT): { status: number | null; stdout: string; stderr: string; error?: Error } {
  const [command, argv] = composeCommand(cli, args);
  const res = spawnSync(command, argv, { cwd, encoding: "utf8", env: { PATH: process.env.PATH ?? "" }, timeout: 60_000 });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr, error: res.error };
}

/** A copy of what compose reads, so the check runs as the operator's `cp .env.example .env` would. */
function project(env: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ops-compose-"));
  fs.copyFileSync(COMPOSE, path.join(dir, "docker-compose.yml"));
  fs.cpSync(path.join(ROOT, "docker"), path.join(dir, "docker"), { recursive: true });
  fs.writeFileSync(path.join(dir, ".env"), env);
  fs.copyFileSync(path.join(ROOT, ".env.gateway.example"), path.join(dir, ".env.gateway"));
  return dir;
}

/** `config` through each of `clis`, all in one copy of the project (the folder names the project). */
function config<C extends ComposeCli>(env: string, ...clis: C[]): Record<C, { status: number | null; stdout: string; stderr: string }> {
  const dir = project(env);
  try {
    return Object.fromEntries(clis.map((cli) => [cli, runCompose(cli, ["-f", "docker-compose.yml", "config"], dir)])) as Record<
      C,
      ReturnType<typeof runCompose>
    >;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const platformServices = () => Object.entries<any>(compose.services).filter(([, s]) => s.environment?.SERVICES);

describe("ops - docker-compose.yml", () => {
  it.each(CLIS)("ops - Compose %s is installed and accepts it with the example env file, resolving every variable", (cli) => {
    const version = runCompose(cli, ["version", "--short"]);
    if (version.status !== 0) throw new Error(`${cli} Compose is missing (${String(version.error ?? version.stderr)}): run .ci/setup.d/41-docker-compose.sh`);
    expect(version.stdout).toMatch(cli === "v1" ? /^1\.\d+\.\d+/ : /^2\.\d+\.\d+/);
    const res = config(envExample, cli)[cli];
    expect(res.stderr).not.toMatch(/ERROR|WARN/i);
    expect(res.status).toBe(0);
    const resolved = parse(res.stdout);
    expect(resolved.services["api-gateway"].environment.DATABASE_URL).toBe("postgresql://ci:CHANGE-ME-postgres@postgres:5432/ci_platform");
  });

  it("ops - both implementations resolve the same services and volumes", () => {
    const both = config(envExample, ...CLIS);
    const [v1, v2] = CLIS.map((cli) => {
      const res = both[cli];
      expect([cli, res.status, res.stderr]).toEqual([cli, 0, ""]);
      return canonicalConfig(parse(res.stdout));
    });
    expect(Object.keys(v2.services).sort()).toEqual(Object.keys(compose.services).sort());
    expect(Object.keys(v2.volumes).sort()).toEqual(Object.keys(compose.volumes).sort());
    for (const name of Object.keys(compose.services)) expect([name, v2.services[name]]).toEqual([name, v1.services[name]]);
    expect(v2.volumes).toEqual(v1.volumes);
    // The forms canonicalConfig folds together are the ones this file uses (it did fold something).
    expect(v2.services.nats.volumes).toContain("volume nats-data → /data (rw)");
    expect(v2.services["api-gateway"].ports).toEqual(["3000:3000/tcp"]);
    expect(v2.services["api-gateway"].healthcheck.start_period).toBe(60);
  });

  it.each(CLIS)("ops - a missing secret stops Compose %s with a message naming it", (cli) => {
    const res = config(envExample.replace(/^POSTGRES_PASSWORD=.*$/m, ""), cli)[cli];
    expect(res.status).not.toBe(0);
    expect(res.stderr).toMatch(/POSTGRES_PASSWORD/);
  });

  it("ops - every service of the platform runs in its own container of the one image", () => {
    const names = platformServices()
      .map(([, s]) => s.environment.SERVICES)
      .sort();
    expect(names).toEqual(Object.keys(SERVICE_REGISTRY).sort());
    for (const [name, s] of platformServices()) {
      expect([name, s.environment.SERVICES]).toEqual([name, name]);
      expect(s.image).toBe("${CI_PLATFORM_IMAGE:-ci-platform:0.1.0}");
      // Only the gateway reads the caller-token signing key (.env.gateway); every service reads .env.
      expect(s.env_file).toEqual(name === "api-gateway" ? [".env", ".env.gateway"] : ".env");
      expect(s.environment.TRANSPORTER).toBe("tls://nats:4222");
      // Its own NATS user (gpu-node: the node's), the password only from .env.
      expect(s.environment.NATS_USER).toBe(name === "gpu-node" ? `gpu-node.${s.environment.GPU_NODE_NAME}` : name);
      expect(s.environment.NATS_PASSWORD).toMatch(/^\$\{NATS_PASSWORD_[A-Z0-9_]+:\?/);
      expect(s.volumes).toContain("./docker/nats-tls/ca.pem:/etc/ci-platform/nats-ca.pem:ro");
    }
  });

  it("ops - every container has a health check and a restart policy; platform ones probe /ready", () => {
    for (const [name, s] of Object.entries<any>(compose.services)) {
      expect([name, s.restart]).toEqual([name, "unless-stopped"]);
      expect([name, Array.isArray(s.healthcheck?.test)]).toEqual([name, true]);
      if (s.environment?.SERVICES) {
        expect(s.healthcheck.test.join(" ")).toContain("http://127.0.0.1:3001/ready");
        expect(s.read_only).toBe(true);
        expect(s.cap_drop).toEqual(["ALL"]);
        expect(s.depends_on.nats.condition).toBe("service_healthy");
      }
    }
  });

  it("ops - NATS runs JetStream on a volume, flushing every write", () => {
    const nats = compose.services.nats;
    expect(nats.command).toEqual(["-c", "/etc/nats/nats-server.conf"]);
    expect(nats.volumes).toContain("nats-data:/data");
    const conf = fs.readFileSync(path.join(ROOT, "docker/nats-server.conf"), "utf8");
    expect(conf).toMatch(/jetstream\s*\{[^}]*store_dir:\s*"?\/data"?[^}]*\}/);
    expect(conf).toMatch(/^\s*sync_interval:\s*always\s*$/m);
  });

  it("ops - NATS is not published, requires a user per role and per gpu-node, and speaks only TLS", () => {
    const nats = compose.services.nats;
    expect(nats.ports).toBeUndefined();
    const conf = fs.readFileSync(path.join(ROOT, "docker/nats-server.conf"), "utf8");
    expect(conf).toMatch(/^authorization\s*\{/m);
    expect(conf).not.toMatch(/^\s*(no_auth_user|authorization\s*\{\s*\})/m);
    expect(conf).toMatch(/tls\s*\{[^}]*cert_file:\s*"\/etc\/nats\/tls\/server.pem"/);
    const users = [...conf.matchAll(/user:\s*"([^"]+)"\s*\n\s*password:\s*\$([A-Z0-9_]+)/g)].map((m) => [m[1], m[2]]);
    for (const [, s] of platformServices()) expect(users.map(([u]) => u)).toContain(s.environment.NATS_USER);
    // The server reads each password from its environment, which compose fills from .env only.
    for (const [, variable] of users) expect(nats.environment[variable]).toMatch(new RegExp(`^\\$\\{${variable}:\\?`));
    expect(nats.volumes).toEqual(
      expect.arrayContaining(["./docker/nats-tls/server.pem:/etc/nats/tls/server.pem:ro", "./docker/nats-tls/server-key.pem:/etc/nats/tls/server-key.pem:ro"]),
    );
  });

  it("ops - gpu-node reserves the NVIDIA cards and reaches the host's Docker engine", () => {
    const node = compose.services["gpu-node"];
    expect(node.deploy.resources.reservations.devices).toEqual([{ driver: "nvidia", count: "all", capabilities: ["gpu"] }]);
    expect(node.volumes).toContain("/var/run/docker.sock:/var/run/docker.sock");
    expect(node.environment.GPU_EXECUTOR).toBe("docker");
  });

  it("ops - the pooler: PgBouncer built from docker/pgbouncer in front of tenant-postgres, whose first start makes its role; dbaas hands it out", () => {
    const pooler = compose.services["tenant-pgbouncer"];
    expect([pooler.build, pooler.image, pooler.read_only, pooler.cap_drop, pooler.stop_signal]).toEqual([
      "./docker/pgbouncer",
      "ci-platform-pgbouncer:0.1.0",
      true,
      ["ALL"],
      "SIGINT",
    ]);
    expect(pooler.environment).toMatchObject({ TENANT_PG_HOST: "tenant-postgres", TENANT_PG_PORT: "5432" });
    expect(pooler.environment.TENANT_POOLER_PASSWORD).toMatch(/^\$\{TENANT_POOLER_PASSWORD:\?/);
    expect(pooler.ports).toEqual(["${TENANT_POOLER_PORT:-6432}:6432"]);
    expect(pooler.depends_on["tenant-postgres"].condition).toBe("service_healthy");
    // The image's entrypoint and ini are the files the quick start uses (scripts/setup/tenant-pgbouncer.sh).
    const dockerfile = fs.readFileSync(path.join(ROOT, "docker/pgbouncer/Dockerfile"), "utf8");
    expect(dockerfile).toMatch(/apt-get install [^\n]*\bpgbouncer\b/);
    expect(dockerfile).toMatch(/^COPY ini\.sh entrypoint\.sh \/usr\/local\/lib\/ci-platform-pgbouncer\/$/m);
    expect(dockerfile).toMatch(/^USER 999:999$/m);
    expect(fs.readFileSync(path.join(ROOT, "scripts/setup/tenant-pgbouncer.sh"), "utf8")).toMatch(
      /docker\/pgbouncer\/ini\.sh[\s\S]*docker\/pgbouncer\/pooler-role\.sh/,
    );
    const tenant = compose.services["tenant-postgres"];
    expect(tenant.volumes).toContain("./docker/pgbouncer/pooler-role.sh:/docker-entrypoint-initdb.d/50-pooler-role.sh:ro");
    expect(tenant.environment.TENANT_POOLER_PASSWORD).toBe(pooler.environment.TENANT_POOLER_PASSWORD);
    expect(fs.statSync(path.join(ROOT, "docker/pgbouncer/pooler-role.sh")).mode & 0o111).toBe(0o111);
    // Only the pooler and the tenant server know the role's password; dbaas its public address.
    for (const [name, svc] of Object.entries<any>(compose.services))
      if (!["tenant-pgbouncer", "tenant-postgres"].includes(name))
        expect([name, JSON.stringify(svc)]).not.toEqual([name, expect.stringContaining("TENANT_POOLER_PASSWORD")]);
    expect(compose.services.dbaas.environment).toMatchObject({
      DBAAS_POOLED_HOST: "${PUBLIC_HOST:-localhost}",
      DBAAS_POOLED_PORT: "${TENANT_POOLER_PORT:-6432}",
    });
    expect(envExample).toMatch(/^TENANT_POOLER_PASSWORD=CHANGE-ME/m);
    const missing = config(envExample.replace(/^TENANT_POOLER_PASSWORD=.*$/m, ""), ...CLIS);
    for (const cli of CLIS)
      expect([cli, missing[cli].status === 0, missing[cli].stderr]).toEqual([cli, false, expect.stringContaining("TENANT_POOLER_PASSWORD")]);
  });

  it("ops - secrets come only from .env, and .env.example names every variable the file uses", () => {
    const text = fs.readFileSync(COMPOSE, "utf8");
    const used = new Set([...text.matchAll(/\$\{([A-Z0-9_]+)/g)].map((m) => m[1]));
    const defined = new Set([...envExample.matchAll(/^([A-Z0-9_]+)=/gm)].map((m) => m[1]));
    expect([...used].filter((v) => !defined.has(v))).toEqual([]);
    for (const secret of ["JWT_SECRET", "POSTGRES_PASSWORD", "TENANT_PG_PASSWORD", "TENANT_POOLER_PASSWORD"])
      expect(envExample).toMatch(new RegExp(`^${secret}=CHANGE-ME`, "m"));
    // No literal password or secret value in the compose file itself.
    for (const [name, svc] of Object.entries<any>(compose.services))
      for (const [key, value] of Object.entries<string>(svc.environment ?? {}))
        if (/PASSWORD|SECRET|_URL$/.test(key) && /:\/\/[^/]*@|PASSWORD|SECRET/.test(key + String(value)))
          expect([name, key, String(value)]).toEqual([name, key, expect.stringMatching(/\$\{[A-Z0-9_]*(PASSWORD|SECRET)[A-Z0-9_]*[:?}]/)]);
    expect(fs.readFileSync(path.join(ROOT, ".gitignore"), "utf8")).toMatch(/^\.env$/m);
  });
});
