/**
 * The compose stack as an operator sets it up (docs/operations.md, "The image without a registry, and the compose stack, tested"), in
 * a temporary project folder: docker-compose.yml and docker/ copied, .env from .env.example with
 * every CHANGE-ME replaced, `npm run bus:config -- --tls` and `npm run caller:keys` run there, and the
 * test-only host-network override (test/fixtures/compose.host.yml) on free loopback ports. Run by
 * Debian 12's docker-compose 1.29 unless `cli` says "v2" (`docker compose`, test/support/compose-cli.ts).
 */
import { execFileSync } from "child_process";
import { randomBytes } from "crypto";
import fs from "fs";
import os from "os";
import path from "path";
import { parse, stringify } from "yaml";
import { SERVICE_REGISTRY } from "../../moleculer.config";
import { canonicalConfig, ComposeCli, composeCommand } from "./compose-cli";
import { freePort, ROOT, waitFor } from "./platform";

export const SERVERS_IMAGE = "ci-platform-test/servers:bookworm";
export const BASE_IMAGE = process.env.BASE_IMAGE || "ci-platform-base:bookworm-node20";

/** Runs a command, returning stdout; a non-zero exit throws with the end of its output. */
export function run(command: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {}): string {
  try {
    return execFileSync(command, args, {
      cwd: opts.cwd ?? ROOT,
      env: opts.env ?? process.env,
      input: opts.input,
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
      timeout: opts.timeoutMs ?? 60_000,
      stdio: ["pipe", "pipe", "pipe"],
    });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${command} ${args.join(" ")} failed: ${e.message}\n${String(e.stdout ?? "").slice(-3000)}\n${String(e.stderr ?? "").slice(-3000)}`, {
      cause: err,
    });
  }
}

/** Builds `tag` with scripts/image/build.sh (the base first, made or reused); returns the seconds it took. */
export function buildImage(tag: string, extra: string[] = []): number {
  const started = Date.now();
  // Builds here cannot reach the npm registry: node_modules come from this checkout (build.sh).
  const env = { ...process.env, IMAGE: tag, IMAGE_DEPS: process.env.IMAGE_DEPS || "prebuilt", BASE_IMAGE };
  run("bash", [path.join(ROOT, "scripts/image/build.sh"), ...extra], { env, timeoutMs: 900_000 });
  return (Date.now() - started) / 1000;
}

/** The servers' image (PostgreSQL, Redis, NATS from Debian's packages on the same base); cached by Docker's layers. */
export function buildServersImage(): number {
  const started = Date.now();
  const dir = path.join(ROOT, "test/fixtures/compose");
  run(
    "docker",
    ["build", "-q", "--network", "host", "--build-arg", `BASE_IMAGE=${BASE_IMAGE}`, "-t", SERVERS_IMAGE, "-f", path.join(dir, "servers.Dockerfile"), dir],
    {
      timeoutMs: 900_000,
    },
  );
  return (Date.now() - started) / 1000;
}

const PLATFORM = Object.keys(SERVICE_REGISTRY);
const healthVar = (service: string) => `TEST_HEALTH_PORT_${service.toUpperCase().replace(/-/g, "_")}`;
const secret = () => randomBytes(18).toString("hex");

export type Stack = {
  dir: string;
  project: string;
  /** The Compose implementation that resolves and runs it. */
  cli: ComposeCli;
  env: Record<string, string>;
  gateway: string;
  /** Every port the stack listens on, by what listens. */
  ports: Record<string, number>;
  compose(args: string[], timeoutMs?: number): string;
  /** Re-resolves the configuration after .env changed (e.g. CI_PLATFORM_IMAGE). */
  resolve(): void;
  setEnv(name: string, value: string): void;
};

export async function createStack(image: string, { cli = "v1" }: { cli?: ComposeCli } = {}): Promise<Stack> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ops-stack-"));
  const project = `cistack${randomBytes(4).toString("hex")}`;
  fs.copyFileSync(path.join(ROOT, "docker-compose.yml"), path.join(dir, "docker-compose.yml"));
  fs.cpSync(path.join(ROOT, "docker"), path.join(dir, "docker"), { recursive: true, filter: (f) => !f.includes("nats-tls") });
  fs.mkdirSync(path.join(dir, "test/fixtures"), { recursive: true });
  fs.copyFileSync(path.join(ROOT, "test/fixtures/compose.host.yml"), path.join(dir, "test/fixtures/compose.host.yml"));

  const ports: Record<string, number> = {};
  for (const name of [
    "GATEWAY_PORT",
    "TENANT_PG_PORT",
    "TENANT_POOLER_PORT",
    "TEST_NATS_PORT",
    "TEST_NATS_MONITOR_PORT",
    "TEST_PG_PORT",
    "TEST_REDIS_PORT",
    ...PLATFORM.map(healthVar),
  ]) {
    let port = await freePort();
    while (Object.values(ports).includes(port)) port = await freePort();
    ports[name] = port;
  }
  const closed = await freePort(); // nothing listens there: the model provider is simply down
  const values: Record<string, string> = {
    CI_PLATFORM_IMAGE: image,
    JWT_SECRET: secret(),
    POSTGRES_PASSWORD: secret(),
    TENANT_PG_PASSWORD: secret(),
    TENANT_POOLER_PASSWORD: secret(),
    PUBLIC_HOST: "127.0.0.1",
    OLLAMA_URL: `http://127.0.0.1:${closed}`,
    DOCKER_GID: String(fs.statSync("/var/run/docker.sock").gid),
    ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
  };
  // As an operator: the example file, every value set; then the generators fill in the rest.
  let envText = fs.readFileSync(path.join(ROOT, ".env.example"), "utf8");
  for (const [name, value] of Object.entries(values)) {
    const line = `${name}=${value}`;
    envText = new RegExp(`^${name}=.*$`, "m").test(envText) ? envText.replace(new RegExp(`^${name}=.*$`, "m"), line) : `${envText.trimEnd()}\n${line}\n`;
  }
  fs.writeFileSync(path.join(dir, ".env"), envText, { mode: 0o600 });
  const tsx = path.join(ROOT, "node_modules/.bin/tsx");
  run(tsx, [path.join(ROOT, "deploy/nats/generate.ts"), "--tls"], { cwd: dir });
  run(tsx, [path.join(ROOT, "deploy/caller-keys.ts")], { cwd: dir });
  const env = Object.fromEntries(
    fs
      .readFileSync(path.join(dir, ".env"), "utf8")
      .split("\n")
      .filter((l) => /^[A-Z0-9_]+=/.test(l))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
  expect(Object.entries(env).filter(([, v]) => v.startsWith("CHANGE-ME"))).toEqual([]);

  // Only .env supplies the variables, as for an operator (a clean environment).
  const composeEnv = { PATH: process.env.PATH ?? "" };
  const composeRun = (impl: ComposeCli, args: string[], timeoutMs?: number) => run(...composeCommand(impl, args), { cwd: dir, env: composeEnv, timeoutMs });
  const configOf = (impl: ComposeCli) => parse(composeRun(impl, ["-f", "docker-compose.yml", "-f", "test/fixtures/compose.host.yml", "config"]));
  const stack: Stack = {
    dir,
    project,
    cli,
    env,
    ports,
    gateway: `http://127.0.0.1:${ports.GATEWAY_PORT}`,
    compose: (args, timeoutMs = 300_000) => composeRun(cli, ["-p", project, "-f", "compose.resolved.yml", ...args], timeoutMs),
    resolve() {
      const config = configOf(cli);
      // v2 runs it: Compose 1 must read the operator's generated .env and the override the same way.
      if (cli === "v2") expect(canonicalConfig(config)).toEqual(canonicalConfig(configOf("v1")));
      // Compose merges device lists, so no override can drop the NVIDIA reservation (no NVIDIA runtime here).
      const node = config.services["gpu-node"];
      expect(canonicalConfig({ services: { node } }).services.node.deploy.resources.reservations.devices).toEqual([
        { driver: "nvidia", count: "all", capabilities: ["gpu"] },
      ]);
      delete node.deploy;
      // The pooler runs the servers' image (its Debian pgbouncer) with the production entrypoint mounted: nothing to build.
      const pooler = config.services["tenant-pgbouncer"];
      expect([pooler.image, pooler.build?.context]).toEqual([SERVERS_IMAGE, path.join(dir, "docker/pgbouncer")]);
      delete pooler.build;
      for (const service of Object.values<Record<string, unknown>>(config.services)) {
        expect(service.network_mode).toBe("host");
        delete service.ports; // discarded on the host network anyway
      }
      // Every string quoted: Compose reads YAML 1.1, where a bare off or no is a boolean.
      fs.writeFileSync(path.join(dir, "compose.resolved.yml"), stringify(config, { defaultStringType: "QUOTE_DOUBLE", defaultKeyType: "PLAIN" }), {
        mode: 0o600,
      });
    },
    setEnv(name, value) {
      const file = path.join(dir, ".env");
      fs.writeFileSync(file, fs.readFileSync(file, "utf8").replace(new RegExp(`^${name}=.*$`, "m"), `${name}=${value}`));
      env[name] = value;
      stack.resolve();
    },
  };
  stack.resolve();
  return stack;
}

/** One container of the stack; `compose` is the version of the Compose that created it (its label). */
export type ContainerState = { name: string; service: string; image: string; user: string; health: string; id: string; compose: string };

export function containers(stack: Stack): ContainerState[] {
  // v2's ps lists running containers only; Compose 1's lists stopped ones too.
  const ids = stack
    .compose(stack.cli === "v2" ? ["ps", "-a", "-q"] : ["ps", "-q"])
    .split("\n")
    .filter(Boolean);
  if (!ids.length) return [];
  const label = (name: string) => `{{index .Config.Labels "com.docker.compose.${name}"}}`;
  const format = `{{.Id}}|{{.Name}}|${label("service")}|{{.Image}}|{{.Config.User}}|{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}|${label("version")}`;
  return run("docker", ["inspect", "-f", format, ...ids])
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [id, name, service, image, user, health, compose] = line.split("|");
      return { id, name, service, image, user, health, compose };
    });
}

/** `up -d`, then every container healthy; returns the seconds from `up` to the last health check green. */
export async function upAndHealthy(stack: Stack, services: number): Promise<number> {
  const started = Date.now();
  try {
    stack.compose(["up", "-d"]);
    await waitFor(
      () => {
        const all = containers(stack);
        return all.length === services && all.every((c) => c.health === "healthy") && all;
      },
      { timeoutMs: 240_000, intervalMs: 500, message: "every container healthy" },
    );
  } catch (err) {
    const states = containers(stack).map(
      (c) => `${c.service}: ${c.health} ${run("docker", ["inspect", "-f", "{{.State.Status}} {{json .State.Health.Log}}", c.id]).slice(-400)}`,
    );
    throw new Error(`${String(err)}\n${states.join("\n")}\n${stack.compose(["logs", "--tail", "8", "--no-color"]).slice(-6000)}`, { cause: err });
  }
  return (Date.now() - started) / 1000;
}

/** Removes the stack's containers and volumes, its folder and the given images (not the cached bases). */
/**
 * The last platform image a run built stays tagged here, so the next run on this machine (CI runs on
 * the session's machine) finds its layers in Docker's cache: the node_modules copies and the
 * runtime's set-up are rebuilt only when they change. The one it replaces is removed.
 */
export const LAYER_CACHE_IMAGE = "ci-platform-test/app:layer-cache";

function imageId(ref: string): string | undefined {
  try {
    return run("docker", ["image", "inspect", "-f", "{{.Id}}", ref]).trim();
  } catch {
    return undefined;
  }
}

/** Tags `image` as the layer cache for the next run and removes the previous one (unless it is the same image). */
function keepLayers(image: string): void {
  const previous = imageId(LAYER_CACHE_IMAGE);
  if (!imageId(image)) return;
  run("docker", ["tag", image, LAYER_CACHE_IMAGE]);
  if (previous && previous !== imageId(LAYER_CACHE_IMAGE)) {
    try {
      run("docker", ["rmi", previous]);
    } catch {
      // still the parent of another tag, or in use: left to Docker
    }
  }
}

/** Takes the stack down with its volumes and removes `images`, the last of them kept as the layer cache. */
export function destroyStack(stack: Stack | undefined, images: string[]): void {
  if (stack) {
    try {
      stack.compose(["down", "-v", "--remove-orphans", "-t", "5"]);
    } catch (err) {
      console.error(String(err));
    }
    fs.rmSync(stack.dir, { recursive: true, force: true });
  }
  const built = images.filter((image) => imageId(image));
  if (built.length) keepLayers(built[built.length - 1]);
  for (const image of images) {
    try {
      run("docker", ["rmi", "-f", image]);
    } catch {
      // never built
    }
  }
}
