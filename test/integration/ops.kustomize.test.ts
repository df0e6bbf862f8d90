/**
 * k8s/ as a kustomize base with an example overlay: scripts/k8s-secrets.sh writes the overlay's
 * secrets, `kubectl kustomize` renders it (offline), and the result holds every expected object,
 * each valid against the Kubernetes schema of its apiVersion and kind (test/support/k8s-schemas.ts:
 * required fields and types, offline), a kind with no schema there failing; the overlay's image everywhere the platform runs, and no CHANGE-ME left.
 */
import { execFileSync } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import { parseAllDocuments } from "yaml";
import { validateK8sObject } from "../support/k8s-schemas";
import { SERVICE_REGISTRY } from "../../moleculer.config";
import { ROOT } from "../support/platform";

type Obj = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; spec?: any; data?: Record<string, string> };
// kustomize folds long base64 values over lines; Kubernetes' decoder skips the newlines, the schema's "byte" format does not.
const unfolded = (o: Obj) =>
  o.kind === "Secret" && o.data ? { ...o, data: Object.fromEntries(Object.entries(o.data).map(([k, v]) => [k, v.replace(/\s/g, "")])) } : o;

const validate = (o: Obj) => validateK8sObject(unfolded(o));

function render(): { objects: Obj[]; text: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kustomize-"));
  fs.cpSync(path.join(ROOT, "k8s"), path.join(dir, "k8s"), { recursive: true, filter: (src) => !src.includes(`${path.sep}secrets`) });
  const overlay = path.join(dir, "k8s/overlays/example");
  // The image as an operator sets it in the overlay.
  const kustomization = path.join(overlay, "kustomization.yaml");
  fs.writeFileSync(kustomization, fs.readFileSync(kustomization, "utf8").replace("newTag: 0.1.0", "newTag: 9.9.9-test"));
  execFileSync("bash", [path.join(ROOT, "scripts/k8s-secrets.sh"), overlay], { encoding: "utf8" });
  const text = execFileSync("kubectl", ["kustomize", overlay], { encoding: "utf8" });
  fs.rmSync(dir, { recursive: true, force: true });
  return { objects: parseAllDocuments(text).map((d) => d.toJS() as Obj), text };
}

describe("ops kustomize - the example overlay renders", () => {
  const { objects, text } = render();
  const find = (kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name);
  const decoded = (o: Obj | undefined, key: string) => Buffer.from((o?.data?.[key] ?? "").replace(/\s/g, ""), "base64").toString();

  test("ops kustomize - every object of the base, each valid against the schema of its apiVersion and kind", () => {
    const base = fs.readdirSync(path.join(ROOT, "k8s/base")).filter((f) => f !== "kustomization.yaml");
    const inBase = base.flatMap((f) => parseAllDocuments(fs.readFileSync(path.join(ROOT, "k8s/base", f), "utf8")).map((d) => d.toJS() as Obj)).filter(Boolean);
    expect(objects.map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`).sort()).toEqual(
      inBase.map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`).sort(),
    );
    for (const o of objects) validate(o);
    const workloads = objects.filter((o) => ["Deployment", "DaemonSet"].includes(o.kind)).map((o) => o.metadata.name);
    for (const service of Object.keys(SERVICE_REGISTRY)) expect(workloads).toContain(service);
  });

  test("ops kustomize - the check can fail: an unknown kind or apiVersion, a required field missing, a field of the wrong type", () => {
    const first = (kind: string) => objects.find((o) => o.kind === kind)!;
    expect(() => validate({ ...first("ConfigMap"), kind: "CronTab" })).toThrow(/^v1 CronTab \S+: no schema for this kind here \(known: v1 Namespace, /);
    expect(() => validate({ ...first("HorizontalPodAutoscaler"), apiVersion: "autoscaling/v2beta1" })).toThrow(/no schema for this kind here/);
    const kinds = [...new Set(objects.map((o) => o.kind))];
    expect(kinds.length).toBeGreaterThanOrEqual(12);
    // Every kind present: its schema is applied (a name that is not a string is refused), and its required fields are.
    for (const kind of kinds) {
      const o = first(kind);
      expect(() => validate({ ...o, metadata: { ...o.metadata, name: 42 as unknown as string } })).toThrow(/metadata\/name must be string/);
    }
    const hpa = first("HorizontalPodAutoscaler");
    expect(() => validate({ ...hpa, spec: { ...hpa.spec, maxReplicas: undefined } })).toThrow(
      /must have required property 'maxReplicas'|required property maxReplicas/,
    );
    const service = first("Service");
    expect(() => validate({ ...service, spec: { ...service.spec, ports: [{ name: "no-port" }] } })).toThrow(/required property port/);
    const deployment = first("Deployment");
    expect(() => validate({ ...deployment, spec: { ...deployment.spec, replicas: "two" } })).toThrow(/spec\/replicas must be integer/);
  });

  test("ops kustomize - the overlay's image on every platform container; secrets generated, no CHANGE-ME", () => {
    const images = objects
      .filter((o) => ["Deployment", "DaemonSet"].includes(o.kind) && Object.keys(SERVICE_REGISTRY).includes(o.metadata.name))
      .flatMap((o) => o.spec.template.spec.containers.map((c: { image: string }) => c.image));
    expect(new Set(images)).toEqual(new Set(["registry.example.com/ci-platform:9.9.9-test"]));
    expect(text).not.toContain("CHANGE-ME");
    const secrets = find("Secret", "ci-platform-secrets");
    expect(decoded(secrets, "JWT_SECRET")).toMatch(/^[A-Za-z0-9]{64}$/);
    expect(decoded(secrets, "DATABASE_URL")).toContain(decoded(secrets, "POSTGRES_PASSWORD"));
    expect(decoded(find("Secret", "nats-auth"), "NATS_PASSWORD")).toMatch(/^\S{16,}$/);
    expect(decoded(find("Secret", "nats-gpu-nodes"), "gpu-host-1")).toBe(
      decoded(find("Secret", "nats-gpu-node-passwords"), "NATS_PASSWORD_GPU_NODE_GPU_HOST_1"),
    );
    expect(decoded(find("Secret", "nats-tls"), "server.pem")).toContain("BEGIN CERTIFICATE");
    // The pooler's role password, in its own Secret; its image from the overlay.
    expect(decoded(find("Secret", "tenant-pooler"), "TENANT_POOLER_PASSWORD")).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(find("Deployment", "tenant-pgbouncer")?.spec.template.spec.containers[0].image).toBe("registry.example.com/ci-platform-pgbouncer:0.1.0");
    expect(find("ConfigMap", "ci-platform-config")?.data?.NATS_TLS_CA).toContain("BEGIN CERTIFICATE");
    expect(find("ConfigMap", "ci-platform-config")?.data?.CALLER_VERIFY_KEY).toMatch(/^\S{20,}$/);
    // Merged, not replaced: the base's other settings are still there.
    expect(find("ConfigMap", "ci-platform-config")?.data?.TRANSPORTER).toContain("nats");
  });
});
