/**
 * The Kubernetes schema of every `apiVersion kind` k8s/ may hold (kubernetes-models: the official
 * OpenAPI schemas, bundled, so no network): required fields and types. A kind not listed here is
 * refused, so a new kind in the manifests fails its tests until its schema is added.
 */
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { DaemonSet } from "kubernetes-models/apps/v1/DaemonSet";
import { StatefulSet } from "kubernetes-models/apps/v1/StatefulSet";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler";
import { Ingress } from "kubernetes-models/networking.k8s.io/v1/Ingress";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";
import { Namespace } from "kubernetes-models/v1/Namespace";
import { PersistentVolumeClaim } from "kubernetes-models/v1/PersistentVolumeClaim";
import { Secret } from "kubernetes-models/v1/Secret";
import { Service } from "kubernetes-models/v1/Service";

type Model = new (data: any) => { validate(): void };

const MODELS: Record<string, Model> = {
  "v1 Namespace": Namespace,
  "v1 ConfigMap": ConfigMap,
  "v1 Secret": Secret,
  "v1 Service": Service,
  "v1 PersistentVolumeClaim": PersistentVolumeClaim,
  "apps/v1 Deployment": Deployment,
  "apps/v1 StatefulSet": StatefulSet,
  "apps/v1 DaemonSet": DaemonSet,
  "autoscaling/v2 HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "policy/v1 PodDisruptionBudget": PodDisruptionBudget,
  "networking.k8s.io/v1 Ingress": Ingress,
  "networking.k8s.io/v1 NetworkPolicy": NetworkPolicy,
};

export const K8S_KINDS: readonly string[] = Object.keys(MODELS);

export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } };

/** Throws naming `where` and the object: no schema for its apiVersion and kind, or a field missing or of the wrong type. */
export function validateK8sObject(o: K8sObject, where = ""): void {
  const id = `${where ? `${where} ` : ""}${o.apiVersion} ${o.kind} ${o.metadata?.name}`;
  const model = MODELS[`${o.apiVersion} ${o.kind}`];
  if (!model) throw new Error(`${id}: no schema for this kind here (known: ${K8S_KINDS.join(", ")})`);
  try {
    new model(o).validate();
  } catch (err) {
    throw new Error(`${id}: ${(err as Error).message}`, { cause: err });
  }
}
