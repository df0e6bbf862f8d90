/**
 * The scaling decision of a model deployment (services/inference/deployments/scaling.ts), as a
 * table: cold start, scale-up under load, idle scale-down to minReplicas, replacement of a replica
 * that exited, and the third never-ready replica in a row failing the deployment with its reason.
 */
import { decide, type ReplicaFacts, type ScalingFacts } from "../../services/inference/deployments/scaling";

const NOW = 1_000_000;
const spec = { minReplicas: 0, maxReplicas: 2, targetInflight: 4, idleTimeoutSeconds: 300 };
const facts = (over: Partial<ScalingFacts> = {}): ScalingFacts => ({
  spec,
  status: "idle",
  statusReason: null,
  failures: 0,
  wanted: false,
  lastRequestAt: null,
  inflight: 0,
  replicas: [],
  now: NOW,
  ...over,
});
const replica = (jobId: string, phase: ReplicaFacts["phase"], over: Partial<ReplicaFacts> = {}): ReplicaFacts => ({
  jobId,
  phase,
  everReady: phase === "ready",
  createdAt: NOW - 1000,
  ...over,
});
const recent = NOW - 1000;

const cases: Array<[string, ScalingFacts, Partial<ReturnType<typeof decide>>]> = [
  ["deployments - nothing asked, nothing running: idle", facts(), { start: 0, stop: [], status: "idle", desired: 0 }],
  ["deployments - a request waits: one replica starts", facts({ wanted: true, lastRequestAt: recent }), { start: 1, status: "starting", desired: 1 }],
  [
    "deployments - a waiting request and a starting replica: no second one",
    facts({ wanted: true, replicas: [replica("a", "starting")] }),
    { start: 0, status: "starting" },
  ],
  ["deployments - minReplicas runs without traffic", facts({ spec: { ...spec, minReplicas: 1 } }), { start: 1, desired: 1 }],
  [
    "deployments - more than targetInflight per ready replica: another starts",
    facts({ lastRequestAt: recent, inflight: 5, replicas: [replica("a", "ready")] }),
    { start: 1, desired: 2, status: "ready", clearWanted: true },
  ],
  [
    "deployments - never more than maxReplicas",
    facts({ lastRequestAt: recent, inflight: 50, replicas: [replica("a", "ready"), replica("b", "ready")] }),
    { start: 0, desired: 2 },
  ],
  [
    "deployments - recent traffic keeps every replica",
    facts({ lastRequestAt: recent, inflight: 0, replicas: [replica("a", "ready"), replica("b", "ready")] }),
    { stop: [], desired: 2 },
  ],
  [
    "deployments - idle past idleTimeoutSeconds: down to minReplicas, the newest first",
    facts({
      spec: { ...spec, minReplicas: 1 },
      lastRequestAt: NOW - 301_000,
      replicas: [replica("old", "ready", { createdAt: 1 }), replica("new", "ready", { createdAt: 2 })],
    }),
    { stop: ["new"], desired: 1, status: "ready" },
  ],
  [
    "deployments - idle to zero: every replica stops",
    facts({ lastRequestAt: NOW - 301_000, replicas: [replica("a", "ready")] }),
    { stop: ["a"], status: "idle" },
  ],
  [
    "deployments - a replica being stopped counts for nothing: a request waiting meanwhile starts a new one",
    facts({ status: "ready", wanted: true, lastRequestAt: recent, replicas: [replica("a", "stopping", { everReady: true })] }),
    { start: 1, stop: [], desired: 1, status: "starting", clearWanted: false },
  ],
  [
    "deployments - a replica being stopped is in no plan of its own (the controller repeats its stop until it ends)",
    facts({ status: "idle", lastRequestAt: NOW - 301_000, replicas: [replica("a", "stopping", { everReady: true })] }),
    { start: 0, stop: [], ended: [], desired: 0, status: "idle" },
  ],
  [
    "deployments - a replica stopped before it became ready (a scale-down) ends without counting as a failure",
    facts({ status: "idle", failures: 2, replicas: [replica("a", "ended", { stopped: true, endReason: "cancelled" })] }),
    { ended: ["a"], failures: 2, status: "idle" },
  ],
  [
    "deployments - a ready replica that exited is replaced while traffic is recent",
    facts({ status: "ready", lastRequestAt: recent, replicas: [replica("a", "ended", { everReady: true })] }),
    { ended: ["a"], start: 1, failures: 0, status: "starting" },
  ],
  [
    "deployments - a replica that never became ready counts one failure, and is replaced",
    facts({ status: "starting", wanted: true, replicas: [replica("a", "ended", { endReason: "exit code 1" })] }),
    { ended: ["a"], start: 1, failures: 1, status: "starting" },
  ],
  [
    "deployments - the third never-ready replica in a row fails the deployment with the last one's reason",
    facts({ status: "starting", wanted: true, failures: 2, replicas: [replica("a", "ended", { endReason: "exit code 3; output: boom" })] }),
    {
      start: 0,
      failures: 3,
      status: "failed",
      statusReason: "3 replicas in a row ended without becoming ready; the last: exit code 3; output: boom",
      clearWanted: true,
    },
  ],
  [
    "deployments - a failed deployment starts nothing until a request or a PATCH resets it",
    facts({ status: "failed", statusReason: "3 replicas…", failures: 3, lastRequestAt: recent }),
    { start: 0, status: "failed", statusReason: "3 replicas…" },
  ],
];

describe("inference deployments - scaling decision", () => {
  test.each(cases)("%s", (_name, input, expected) => {
    expect(decide(input)).toMatchObject(expected);
  });
});
