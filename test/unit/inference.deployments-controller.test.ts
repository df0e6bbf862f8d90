/**
 * The deployments controller's scale-down (services/inference/deployments/controller.ts), its
 * database and the scheduler stood in for (the e2e tests run it against real ones): a replica
 * chosen to stop is marked stopping first (out of routing), keeps its job while this process has a
 * request in flight to it for up to STOP_DRAIN_MS, and its stop is asked again until its job ends.
 */
import type { Pool } from "pg";
import type { ReplicaJob } from "../../lib/deployment-protocol";
import { DeploymentController, STOP_DRAIN_MS, type ReplicaJobs } from "../../services/inference/deployments/controller";
import { ReplicaLinks } from "../../services/inference/deployments/links";
import type { DeploymentRow, DeploymentsRepository, ReplicaRow } from "../../services/inference/deployments/repository";

const T0 = 1_000_000_000;
const deployment: DeploymentRow = {
  id: "d1",
  client_id: "c1",
  name: "mine",
  spec: {
    command: "serve",
    gpuCount: 1,
    port: 8000,
    readinessPath: "/v1/models",
    minReplicas: 0,
    maxReplicas: 2,
    targetInflight: 4,
    idleTimeoutSeconds: 60,
    coldStartTimeoutSeconds: 60,
  },
  env: {},
  status: "ready",
  status_reason: null,
  failures: 0,
  desired: 1,
  wanted_at: null,
  last_request_at: new Date(T0 - 120_000), // idle: down to minReplicas (0)
  created_at: new Date(0),
} as DeploymentRow;

function setup() {
  let now = T0;
  const rows: ReplicaRow[] = [
    { job_id: "a", deployment_id: "d1", node_id: "n1", model_id: "m", ready_at: new Date(0), stopping_at: null, ended_at: null, created_at: new Date(0) },
  ];
  const job: ReplicaJob = { id: "a", status: "running", nodeId: "n1", exitCode: null, errorMessage: null, outputTail: "" };
  const stops: string[] = [];
  const changed: string[] = [];
  const repo = {
    all: async () => [deployment],
    liveReplicas: async () => rows.filter((r) => !r.ended_at).map((r) => ({ ...r })),
    replicasStopping: async (ids: string[]) => rows.forEach((r) => ids.includes(r.job_id) && !r.stopping_at && (r.stopping_at = new Date(now))),
    replicaEnded: async (id: string) => rows.forEach((r) => r.job_id === id && (r.ended_at = new Date(now))),
    saveState: async () => undefined,
    addReplica: async () => undefined,
    replicaReady: async () => undefined,
  } as unknown as DeploymentsRepository;
  const jobs: ReplicaJobs = {
    list: async () => [{ ...job }],
    submit: async () => ({ id: "new" }),
    stop: async (_client, id) => void stops.push(id),
  };
  const db = { connect: async () => ({ query: async () => ({ rows: [{ locked: true }] }), release: () => undefined }) } as unknown as Pool;
  const links = new ReplicaLinks(() => ({ latin1: () => true, call: () => Promise.reject(new Error("no bus in this test")) }));
  const controller = new DeploymentController({
    db,
    repo,
    jobs,
    links,
    tickMs: 1000,
    warn: (m) => {
      throw new Error(m);
    },
    replicasChanged: (id) => changed.push(id),
    now: () => now,
  });
  return { controller, rows, job, stops, changed, links, advance: (ms: number) => (now += ms) };
}

describe("inference deployments controller - scale-down", () => {
  it("deployments controller - an idle replica with nothing in flight is marked stopping, out of routing, and stopped in the same round", async () => {
    const { controller, rows, stops, changed } = setup();
    await controller.round();
    expect(rows[0].stopping_at).not.toBeNull();
    expect(changed).toEqual(["d1"]);
    expect(stops).toEqual(["a"]);
  });

  it("deployments controller - one with a request in flight here drains: marked at once, its job stopped when the request is done", async () => {
    const { controller, rows, stops, links, advance } = setup();
    links.get("a", "n1").agent.inflight = 1;
    await controller.round();
    expect([rows[0].stopping_at !== null, stops]).toEqual([true, []]);
    advance(5_000);
    await controller.round();
    expect(stops).toEqual([]);
    links.get("a", "n1").agent.inflight = 0;
    advance(1_000);
    await controller.round();
    expect(stops).toEqual(["a"]);
    links.clear();
  });

  it("deployments controller - a drain ends after STOP_DRAIN_MS however busy; the stop is asked again each round until the job ends, then never", async () => {
    const { controller, rows, job, stops, links, advance } = setup();
    links.get("a", "n1").agent.inflight = 3;
    await controller.round();
    advance(STOP_DRAIN_MS - 1);
    await controller.round();
    expect(stops).toEqual([]);
    advance(1);
    await controller.round();
    expect(stops).toEqual(["a"]);
    advance(1_000);
    await controller.round(); // its job still running (a stop that did not take): asked again
    expect(stops).toEqual(["a", "a"]);
    job.status = "cancelled";
    advance(1_000);
    await controller.round();
    expect([stops, rows[0].ended_at !== null]).toEqual([["a", "a"], true]);
    links.clear();
  });
});
