/**
 * k8s/: every document is valid against the Kubernetes schemas (kubernetes-models), references
 * only what exists, and follows the operating rules: probes on the health port, requests and
 * limits, the "restricted" Pod Security Standard (gpu-node's Docker socket being the one
 * documented exception), a workload for every service of the platform, and the tenant pooler
 * (one PgBouncer, its role made by tenant-postgres's first start).
 */
import fs from "fs";
import path from "path";
import { parseAllDocuments } from "yaml";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { validateK8sObject } from "../support/k8s-schemas";
import { SERVICE_REGISTRY } from "../../moleculer.config";

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: any;
  data?: any;
  stringData?: any;
  file: string;
};

const DIR = path.resolve(__dirname, "../../k8s/base");
const WORKLOADS = new Set(["Deployment", "StatefulSet", "DaemonSet"]);
/** Volume types a "restricted" pod may use. */
const RESTRICTED_VOLUMES = new Set(["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"]);
/** The documented exception: gpu-node mounts the host's Docker socket (docs/operations.md, "Deploy on Kubernetes"). */
const EXCEPTIONS: Record<string, string[]> = { "ci-platform-gpu/gpu-node": ["hostPath volume docker-socket", "hostPath volume jobs"] };

function load(): Obj[] {
  const objects: Obj[] = [];
  for (const file of fs
    .readdirSync(DIR)
    .filter((f) => /\.ya?ml$/.test(f) && f !== "kustomization.yaml")
    .sort()) {
    for (const doc of parseAllDocuments(fs.readFileSync(path.join(DIR, file), "utf8"))) {
      if (doc.errors.length) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join("; ")}`);
      const value = doc.toJS();
      if (value) objects.push({ ...value, file });
    }
  }
  return objects;
}

const objects = load();
const ofKind = (kind: string) => objects.filter((o) => o.kind === kind);
const workloads = () => objects.filter((o) => WORKLOADS.has(o.kind));
const id = (o: Obj) => `${o.metadata.namespace}/${o.metadata.name}`;
const env = (c: any, name: string) => c.env?.find((e: any) => e.name === name)?.value;
const matches = (selector: Record<string, string>, labels: Record<string, string> = {}) => Object.entries(selector).every(([k, v]) => labels[k] === v);

/** Violations of the "restricted" Pod Security Standard in a pod spec. */
function restrictedViolations(pod: any): string[] {
  const v: string[] = [];
  const psc = pod.securityContext ?? {};
  if (pod.hostNetwork || pod.hostPID || pod.hostIPC) v.push("host namespaces");
  for (const vol of pod.volumes ?? []) {
    const type = Object.keys(vol).find((k) => k !== "name")!;
    if (!RESTRICTED_VOLUMES.has(type)) v.push(`${type} volume ${vol.name}`);
  }
  for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
    const sc = c.securityContext ?? {};
    if (sc.privileged) v.push(`${c.name}: privileged`);
    if (sc.allowPrivilegeEscalation !== false) v.push(`${c.name}: allowPrivilegeEscalation not false`);
    if (!(sc.runAsNonRoot ?? psc.runAsNonRoot)) v.push(`${c.name}: runAsNonRoot not true`);
    if ((sc.runAsUser ?? psc.runAsUser) === 0) v.push(`${c.name}: runAsUser 0`);
    const seccomp = (sc.seccompProfile ?? psc.seccompProfile)?.type;
    if (seccomp !== "RuntimeDefault" && seccomp !== "Localhost") v.push(`${c.name}: seccompProfile`);
    if (!sc.capabilities?.drop?.includes("ALL")) v.push(`${c.name}: capabilities not dropped`);
    for (const cap of sc.capabilities?.add ?? []) if (cap !== "NET_BIND_SERVICE") v.push(`${c.name}: adds ${cap}`);
    for (const p of c.ports ?? []) if (p.hostPort) v.push(`${c.name}: hostPort`);
  }
  return v;
}

describe("ops - Kubernetes manifests", () => {
  it("ops - every document is valid against the Kubernetes schemas", () => {
    expect(objects.length).toBeGreaterThan(20);
    for (const { file, ...data } of objects) validateK8sObject(data, file);
  });

  it("ops - the schema check rejects a broken manifest (the validator is live)", () => {
    const broken = JSON.parse(JSON.stringify(ofKind("Deployment")[0]));
    delete broken.file;
    broken.spec.replicas = "two";
    expect(() => new Deployment(broken).validate()).toThrow(/replicas/);
  });

  it("ops - pod and container fields are spelled as Kubernetes knows them (the schemas accept unknown ones)", () => {
    const known = {
      pod: [
        "automountServiceAccountToken",
        "containers",
        "initContainers",
        "nodeSelector",
        "securityContext",
        "terminationGracePeriodSeconds",
        "tolerations",
        "volumes",
        "affinity",
        "serviceAccountName",
        "priorityClassName",
        "runtimeClassName",
      ],
      container: [
        "name",
        "image",
        "args",
        "command",
        "env",
        "envFrom",
        "ports",
        "resources",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "securityContext",
        "volumeMounts",
        "imagePullPolicy",
        "lifecycle",
      ],
      containerSecurity: [
        "allowPrivilegeEscalation",
        "readOnlyRootFilesystem",
        "runAsNonRoot",
        "runAsUser",
        "runAsGroup",
        "capabilities",
        "seccompProfile",
        "privileged",
      ],
      podSecurity: ["runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup", "supplementalGroups", "seccompProfile"],
      probe: ["httpGet", "exec", "tcpSocket", "periodSeconds", "timeoutSeconds", "failureThreshold", "successThreshold", "initialDelaySeconds"],
    };
    const unknown = (where: string, obj: object | undefined, allowed: string[]) =>
      Object.keys(obj ?? {})
        .filter((k) => !allowed.includes(k))
        .map((k) => `${where}.${k}`);
    const found: string[] = [];
    for (const w of workloads()) {
      const pod = w.spec.template.spec;
      found.push(...unknown(id(w), pod, known.pod), ...unknown(`${id(w)}.securityContext`, pod.securityContext, known.podSecurity));
      for (const c of pod.containers) {
        const where = `${id(w)}/${c.name}`;
        found.push(...unknown(where, c, known.container), ...unknown(`${where}.securityContext`, c.securityContext, known.containerSecurity));
        for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"]) found.push(...unknown(`${where}.${probe}`, c[probe], known.probe));
      }
    }
    expect(found).toEqual([]);
  });

  it("ops - everything lives in a namespace the manifests create, and names are unique", () => {
    const namespaces = new Set(ofKind("Namespace").map((n) => n.metadata.name));
    const seen = new Set<string>();
    for (const o of objects.filter((x) => x.kind !== "Namespace")) {
      expect(namespaces.has(o.metadata.namespace!)).toBe(true);
      const key = `${o.kind}/${id(o)}`;
      expect(seen.has(key)).toBe(false);
      seen.add(key);
    }
  });

  it("ops - every service of the platform has a workload running it from the one image", () => {
    const byService = new Map<string, Obj>();
    for (const w of workloads()) {
      for (const c of w.spec.template.spec.containers) {
        const services =
          env(c, "SERVICES") ?? objects.find((o) => o.kind === "ConfigMap" && o.metadata.namespace === w.metadata.namespace && o.data?.SERVICES)?.data.SERVICES;
        if (c.image.includes("/ci-platform:")) byService.set(services, w);
      }
    }
    for (const name of Object.keys(SERVICE_REGISTRY)) expect([name, byService.has(name)]).toEqual([name, true]);
    expect(byService.get("gpu-node")?.kind).toBe("DaemonSet");
  });

  it("ops - every container has requests, limits and probes; platform ones probe /live and /ready on the health port", () => {
    for (const w of workloads()) {
      const pod = w.spec.template.spec;
      for (const c of pod.containers) {
        const where = `${id(w)}/${c.name}`;
        for (const kind of ["requests", "limits"])
          for (const r of ["cpu", "memory"]) expect([where, kind, r, c.resources?.[kind]?.[r]]).not.toContainEqual(undefined);
        expect([where, !!c.livenessProbe, !!c.readinessProbe]).toEqual([where, true, true]);
        if (!c.image.includes("/ci-platform:")) continue;
        expect(c.livenessProbe.httpGet).toEqual({ path: "/live", port: "health" });
        expect(c.readinessProbe.httpGet).toEqual({ path: "/ready", port: "health" });
        expect(c.ports.find((p: any) => p.name === "health").containerPort).toBe(3001);
        expect(c.ports.find((p: any) => p.name === "metrics").containerPort).toBe(3030);
      }
      expect(matches(w.spec.selector.matchLabels, w.spec.template.metadata.labels)).toBe(true);
    }
  });

  it("ops - pods meet the restricted Pod Security Standard, except gpu-node's documented host mounts", () => {
    const restricted = new Set(
      ofKind("Namespace")
        .filter((n) => n.metadata.labels?.["pod-security.kubernetes.io/enforce"] === "restricted")
        .map((n) => n.metadata.name),
    );
    expect(restricted.has("ci-platform")).toBe(true);
    for (const w of workloads()) {
      const violations = restrictedViolations(w.spec.template.spec);
      expect([id(w), violations]).toEqual([id(w), EXCEPTIONS[id(w)] ?? []]);
      if (violations.length) expect(restricted.has(w.metadata.namespace!)).toBe(false);
      for (const c of w.spec.template.spec.containers) expect([id(w), c.securityContext.readOnlyRootFilesystem]).toEqual([id(w), true]);
      expect(w.spec.template.spec.automountServiceAccountToken).toBe(false);
    }
    // The exception's namespace still warns about and audits it.
    const gpuNs = ofKind("Namespace").find((n) => n.metadata.name === "ci-platform-gpu")!;
    expect(gpuNs.metadata.labels!["pod-security.kubernetes.io/warn"]).toBe("restricted");
  });

  it("ops - gpu-node runs on GPU-labelled nodes and requests nvidia.com/gpu", () => {
    const ds = ofKind("DaemonSet").find((d) => d.metadata.name === "gpu-node")!;
    const pod = ds.spec.template.spec;
    expect(pod.nodeSelector).toEqual({ "nvidia.com/gpu.present": "true" });
    expect(pod.containers[0].resources.limits["nvidia.com/gpu"]).toBeGreaterThanOrEqual(1);
    expect(pod.tolerations).toContainEqual(expect.objectContaining({ key: "nvidia.com/gpu" }));
  });

  it("ops - references resolve: HPAs, PDBs, Services, Ingress, ConfigMaps and Secrets", () => {
    const find = (kind: string, ns: string | undefined, name: string) =>
      objects.find((o) => o.kind === kind && o.metadata.namespace === ns && o.metadata.name === name);
    for (const hpa of ofKind("HorizontalPodAutoscaler")) {
      expect(find(hpa.spec.scaleTargetRef.kind, hpa.metadata.namespace, hpa.spec.scaleTargetRef.name)).toBeDefined();
      expect(hpa.spec.maxReplicas).toBeGreaterThan(hpa.spec.minReplicas);
    }
    expect(
      ofKind("HorizontalPodAutoscaler")
        .map((h) => h.metadata.name)
        .sort(),
    ).toEqual(["api-gateway", "auth", "inference", "usage"]);
    const podsOf = (ns?: string) =>
      workloads()
        .filter((w) => w.metadata.namespace === ns)
        .map((w) => w.spec.template.metadata.labels);
    for (const pdb of ofKind("PodDisruptionBudget")) expect(podsOf(pdb.metadata.namespace).some((l) => matches(pdb.spec.selector.matchLabels, l))).toBe(true);
    for (const svc of ofKind("Service"))
      expect([svc.metadata.name, podsOf(svc.metadata.namespace).some((l) => matches(svc.spec.selector, l))]).toEqual([svc.metadata.name, true]);
    for (const ing of ofKind("Ingress"))
      for (const rule of ing.spec.rules) for (const p of rule.http.paths) expect(find("Service", ing.metadata.namespace, p.backend.service.name)).toBeDefined();
    for (const w of workloads()) {
      for (const c of w.spec.template.spec.containers) {
        for (const from of c.envFrom ?? []) {
          if (from.configMapRef) expect(find("ConfigMap", w.metadata.namespace, from.configMapRef.name)).toBeDefined();
          if (from.secretRef) expect(find("Secret", w.metadata.namespace, from.secretRef.name)).toBeDefined();
        }
        for (const e of c.env ?? []) {
          const ref = e.valueFrom?.secretKeyRef;
          if (ref) expect(find("Secret", w.metadata.namespace, ref.name)?.stringData?.[ref.key]).toBeDefined();
        }
      }
      for (const v of w.spec.template.spec.volumes ?? []) if (v.configMap) expect(find("ConfigMap", w.metadata.namespace, v.configMap.name)).toBeDefined();
    }
  });

  it("ops - NATS requires TLS and a user per role and per GPU host; each pod gets only its own password", () => {
    const conf: string = ofKind("ConfigMap").find((c) => c.metadata.name === "nats-config")!.data["nats-server.conf"];
    expect(conf).toMatch(/^authorization\s*\{/m);
    expect(conf).toMatch(/^tls\s*\{/m);
    const nats = ofKind("StatefulSet").find((s) => s.metadata.name === "nats")!.spec.template.spec.containers[0];
    const serverEnv = new Set((nats.env ?? []).map((e: any) => e.name));
    for (const m of conf.matchAll(/password:\s*\$([A-Z0-9_]+)/g)) expect([m[1], serverEnv.has(m[1])]).toEqual([m[1], true]);
    for (const svc of ofKind("Service").filter((x) => x.metadata.name === "nats")) expect(svc.spec.type ?? "ClusterIP").toBe("ClusterIP");
    for (const w of workloads()) {
      for (const c of w.spec.template.spec.containers) {
        if (!c.image.includes("/ci-platform:")) continue;
        const user = env(c, "NATS_USER");
        if (w.kind === "DaemonSet") {
          expect(user).toBe("gpu-node.$(GPU_NODE_NAME)");
          expect(env(c, "NATS_PASSWORD_FILE")).toBe("/etc/ci-platform/nats-gpu-nodes/$(GPU_NODE_NAME)");
          continue;
        }
        const role = env(c, "SERVICES");
        expect([id(w), user]).toEqual([id(w), role]);
        expect(c.env.find((e: any) => e.name === "NATS_PASSWORD").valueFrom.secretKeyRef.name).toBe(`nats-${role}`);
        expect(conf).toContain(`user: "${role}"`);
      }
    }
    for (const cm of ofKind("ConfigMap").filter((c) => c.data?.TRANSPORTER)) expect(cm.data.TRANSPORTER).toMatch(/^tls:\/\//);
  });

  it("ops - secrets are placeholders, NATS flushes every write, and pods get time to drain", () => {
    for (const s of ofKind("Secret"))
      for (const [k, v] of Object.entries<string>(s.stringData ?? {})) expect([k, v]).toEqual([k, expect.stringContaining("CHANGE-ME")]);
    expect(ofKind("Secret").every((s) => !s.data)).toBe(true);
    const nats = ofKind("ConfigMap").find((c) => c.metadata.name === "nats-config")!;
    expect(nats.data["nats-server.conf"]).toMatch(/^\s*sync_interval:\s*always\s*$/m);
    expect(ofKind("StatefulSet").find((s) => s.metadata.name === "nats")!.spec.volumeClaimTemplates).toHaveLength(1);
    const config = ofKind("ConfigMap").find((c) => c.metadata.name === "ci-platform-config")!.data;
    for (const d of ofKind("Deployment"))
      expect(d.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThan(Number(config.SHUTDOWN_DELAY_S) + Number(config.SHUTDOWN_TIMEOUT_S));
  });

  it("ops - the pooler: one PgBouncer (never two at once) in front of tenant-postgres, whose first start makes its role", () => {
    const find = (kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name)!;
    const pooler = find("Deployment", "tenant-pgbouncer");
    expect([pooler.spec.replicas, pooler.spec.strategy.type]).toEqual([1, "Recreate"]);
    expect(ofKind("HorizontalPodAutoscaler").map((h) => h.spec.scaleTargetRef.name)).not.toContain("tenant-pgbouncer");
    const container = pooler.spec.template.spec.containers[0];
    expect(container.image).toBe("registry.example.com/ci-platform-pgbouncer:0.1.0");
    expect(pooler.spec.template.spec.securityContext.runAsUser).toBe(999); // USER 999:999 of docker/pgbouncer/Dockerfile
    expect(fs.readFileSync(path.resolve(DIR, "../../docker/pgbouncer/Dockerfile"), "utf8")).toMatch(/^USER 999:999$/m);
    // ini.sh's settings from the ConfigMap, the role's password from its own Secret.
    const settings = find("ConfigMap", container.envFrom[0].configMapRef.name).data;
    expect(settings).toMatchObject({ TENANT_PG_HOST: "tenant-postgres.ci-platform.svc.cluster.local", TENANT_PG_PORT: "5432", TENANT_POOLER_LISTEN_ADDR: "*" });
    const port = container.ports.find((p: any) => p.name === "pgbouncer").containerPort;
    expect(String(port)).toBe(settings.TENANT_POOLER_PORT);
    const passwordRef = (c: any) => c.env?.find((e: any) => e.name === "TENANT_POOLER_PASSWORD")?.valueFrom?.secretKeyRef;
    expect(passwordRef(container)).toEqual({ name: "tenant-pooler", key: "TENANT_POOLER_PASSWORD" });
    // The service clients reach, and what dbaas tells them.
    const service = find("Service", "tenant-pgbouncer");
    expect([service.spec.type, service.spec.ports[0].port]).toEqual(["LoadBalancer", port]);
    expect(find("ConfigMap", "ci-platform-config").data.DBAAS_POOLED_PORT).toBe(String(service.spec.ports[0].port));
    // tenant-postgres: the role made by /docker-entrypoint-initdb.d from the same script as compose's.
    const tenant = find("StatefulSet", "tenant-postgres").spec.template.spec;
    expect(passwordRef(tenant.containers[0])).toEqual({ name: "tenant-pooler", key: "TENANT_POOLER_PASSWORD" });
    const init = tenant.volumes.find((v: any) => v.configMap?.name === "tenant-postgres-init");
    expect([init.configMap.defaultMode, tenant.containers[0].volumeMounts.find((m: any) => m.name === init.name).mountPath]).toEqual([
      0o555,
      "/docker-entrypoint-initdb.d",
    ]);
    expect(find("ConfigMap", "tenant-postgres-init").data["50-pooler-role.sh"]).toBe(
      fs.readFileSync(path.resolve(DIR, "../../docker/pgbouncer/pooler-role.sh"), "utf8"),
    );
    // No other pod reads the role's password.
    for (const w of workloads())
      for (const c of w.spec.template.spec.containers) if (passwordRef(c)) expect(["tenant-pgbouncer", "tenant-postgres"]).toContain(w.metadata.name);
    expect(find("Secret", "ci-platform-secrets").stringData.TENANT_POOLER_PASSWORD).toBeUndefined();
  });

  it("ops - auth's memory is sized from its cap on concurrent hashes (base + cap x 128 MiB fits the request)", () => {
    const auth = ofKind("Deployment").find((d) => d.metadata.name === "auth")!.spec.template.spec.containers[0];
    const cap = Number(auth.env.find((e: any) => e.name === "AUTH_HASH_CONCURRENCY").value);
    const mib = (q: string) => Number(/^(\d+)Mi$/.exec(q)![1]);
    // scrypt N = 2^17, r = 8 holds 128 x N x r bytes a hash; the process itself about 150 MiB (bench:auth-memory)
    const peak = 150 + cap * ((128 * 2 ** 17 * 8) >> 20);
    expect(cap).toBeGreaterThanOrEqual(1);
    expect(mib(auth.resources.requests.memory)).toBeGreaterThanOrEqual(peak);
    expect(mib(auth.resources.limits.memory)).toBeGreaterThanOrEqual(mib(auth.resources.requests.memory));
  });
});
