/**
 * `npm run bus:config -- [options]`: writes the NATS server configuration of an authenticated,
 * permissioned bus (users per role and per gpu-node, from lib/bus-permissions.ts and what the
 * services' schemas declare), optionally a CA and server certificate, and puts a random password
 * per user into an env file.
 *
 *   --nodes a,b          gpu-node names (node ids gpu-node.a, …; each gets its own user)   [gpu-1]
 *   --out DIR            where nats-server.conf (and nats-tls/) go                        [docker]
 *   --env-out FILE       env file receiving NATS_PASSWORD_<USER>=… (kept if already set)    [.env]
 *   --tls                also make nats-tls/{ca.pem,server.pem,server-key.pem} (openssl)
 *   --tls-names n1,n2    names in the server certificate       [nats,nats.ci-platform.svc.cluster.local,localhost,127.0.0.1]
 *   --tls-dir DIR        where the server finds them                                     [/etc/nats/tls]
 *   --namespace NS       Moleculer NAMESPACE of the platform                                [none]
 *   --store-dir DIR      JetStream storage                                                 [/data]
 *   --rotate             replace passwords already in the env file
 *   --conf-only          write only nats-server.conf (after actions' `callers` or services' `emits`/`publishes` changed): no certificates, no passwords
 *   --k8s FILE           instead: embed the configuration (TLS on, no files made) in FILE's nats-config
 *                        ConfigMap, e.g. `--k8s k8s/base/10-nats.yaml --nodes <GPU host names>`
 */
import fs from "fs";
import path from "path";
import { platformBusTables } from "../../moleculer.config";
import { embedInConfigMap, generateBus, makeCertificates, updateEnvFile } from "../../lib/bus-setup";

function arg(name: string, fallback?: string): string | undefined {
  const at = process.argv.indexOf(`--${name}`);
  return at < 0 ? fallback : process.argv[at + 1];
}
const flag = (name: string) => process.argv.includes(`--${name}`);
const listOf = (value: string | undefined) =>
  (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/** The file before the move to the kustomize base (k8s/10-nats.yaml, as older notes say) is read as k8s/base/…. */
function k8sFile(given: string | undefined): string | undefined {
  const moved = given && path.join(path.dirname(given), "base", path.basename(given));
  if (!given || fs.existsSync(given) || !moved || !fs.existsSync(moved)) return given;
  console.error(`${given} moved to ${moved} (the kustomize base): updating that`);
  return moved;
}
const k8s = k8sFile(arg("k8s"));
if (k8s) {
  const conf = generateBus({
    namespace: arg("namespace", ""),
    gpuNodes: listOf(arg("nodes", "gpu-host-1")),
    ...platformBusTables(),
    httpPort: 8222,
    storeDir: "/data",
    tls: { certFile: "/etc/nats/tls/server.pem", keyFile: "/etc/nats/tls/server-key.pem" },
  }).config;
  fs.writeFileSync(k8s, embedInConfigMap(fs.readFileSync(k8s, "utf8"), conf));
  console.log(`${k8s}: nats-config updated (passwords come from the Secrets named in its StatefulSet's env)`);
  process.exit(0);
}

const out = arg("out", "docker")!;
const envFile = arg("env-out", ".env")!;
const tlsDir = arg("tls-dir", "/etc/nats/tls")!;
fs.mkdirSync(out, { recursive: true });
if (flag("tls") && !flag("conf-only")) {
  const names = listOf(arg("tls-names", "nats,nats.ci-platform.svc.cluster.local,localhost,127.0.0.1"));
  makeCertificates(path.join(out, "nats-tls"), names);
  console.log(`CA and server certificate for ${names.join(", ")} in ${path.join(out, "nats-tls")} (clients need only ca.pem)`);
}
const generated = generateBus({
  namespace: arg("namespace", ""),
  gpuNodes: listOf(arg("nodes", "gpu-1")),
  ...platformBusTables(),
  httpPort: 8222,
  storeDir: arg("store-dir", "/data")!,
  tls: flag("tls") ? { certFile: `${tlsDir}/server.pem`, keyFile: `${tlsDir}/server-key.pem` } : undefined,
});
fs.writeFileSync(path.join(out, "nats-server.conf"), generated.config);
console.log(`${path.join(out, "nats-server.conf")}: users ${Object.keys(generated.passwords).join(", ")}`);
if (flag("conf-only")) process.exit(0);
const written = updateEnvFile(envFile, generated.env, flag("rotate"));
console.log(`${envFile}: ${written.length ? `set ${written.join(", ")}` : "every NATS password was already set (--rotate to replace)"}`);
