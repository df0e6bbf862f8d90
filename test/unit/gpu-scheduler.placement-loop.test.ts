/** The placement loop's pure pass decision (table), and the loop on in-memory fakes. */
import { randomUUID } from "crypto";
import { ViewCard } from "../../services/gpu-scheduler/core/cluster-view";
import { waitingReason } from "../../services/gpu-scheduler/api/job-view";
import { decidePass, isPermanentRejection, PlacementLoop } from "../../services/gpu-scheduler/loop/placement-loop";
import { fakeCluster, heartbeat, quiet, until } from "./gpu-scheduler.fakes";

const card = (nodeId: string, uuid: string, name = "NVIDIA GeForce RTX 3060"): ViewCard => ({
  nodeId,
  uuid,
  index: 0,
  name,
  memoryTotal: 12288,
  memoryUsed: 0,
  utilization: 0,
  temperature: 40,
});

describe("gpu-scheduler placement loop - decidePass", () => {
  const queue = [
    { jobId: "a100-job", gpuType: "A100", seq: 1 },
    { jobId: "any-1", gpuType: null, seq: 2 },
    { jobId: "any-2", gpuType: null, seq: 3 },
  ];

  test("gpu-scheduler placement loop - places on free cards with their name and keeps why the others wait", () => {
    const pass = decidePass([card("node-a", "GPU-1"), card("node-a", "GPU-2")], { held: new Set(["GPU-2"]), queue }, 0);
    expect(pass.placements).toEqual([{ jobId: "any-1", nodeId: "node-a", gpuUuid: "GPU-1", gpuUuids: ["GPU-1"], gpuName: "NVIDIA GeForce RTX 3060" }]);
    expect(pass.waiting).toEqual([
      { jobId: "a100-job", reason: "NO_MATCHING_GPU" },
      { jobId: "any-2", reason: "MATCHING_GPUS_BUSY" },
    ]);
    expect(pass).toMatchObject({ heldElsewhere: 0, readAgain: false });
  });

  test.each([
    ["more than before: the queue read may have been short", 0, true],
    ["as many as before: the read was long enough", 1, false],
  ])("gpu-scheduler placement loop - cards held outside the schedulable ones, %s", (_name, before, readAgain) => {
    const pass = decidePass([card("node-a", "GPU-1")], { held: new Set(["GPU-9"]), queue }, before);
    expect(pass).toMatchObject({ heldElsewhere: 1, readAgain });
  });

  test("gpu-scheduler placement loop - the GPU-seconds left are the quota less its use and the worst case of the jobs holding cards", () => {
    const jobs = [1, 2].map((seq) => ({ jobId: `j${seq}`, gpuType: null, seq, clientId: "a", timeoutSeconds: 30 }));
    const limits = new Map([["a", { weight: 1, runningGpus: null, queuedJobs: 10, gpuSeconds: { limit: 100, used: 40 } }]]);
    const decide = (inFlight: number) =>
      decidePass([card("node-a", "GPU-1"), card("node-a", "GPU-2")], { held: new Set(), queue: jobs, inFlight: new Map([["a", inFlight]]) }, 0, limits);
    // 100 - 40 - 20 = 40 left: j1 reserves 30 (10 left), j2 30 more.
    expect(decide(20).placements.map((p) => p.jobId)).toEqual(["j1", "j2"]);
    // 100 - 40 - 30 = 30 left: j1 takes it all, j2 waits.
    expect(decide(30).waiting).toEqual([{ jobId: "j2", reason: "QUOTA_EXCEEDED", quota: "gpuSeconds", reserved: true }]);
    expect(decide(60).placements).toEqual([]);
  });

  test("gpu-scheduler placement loop - the credits left are the quota less its use and the running jobs' worst case at their cards' prices", () => {
    const jobs = [1, 2].map((seq) => ({ jobId: `j${seq}`, gpuType: null, seq, clientId: "a", timeoutSeconds: 30 }));
    const perGpuSecond = (name: string) => (name === "Dear" ? 1 : 0.5);
    const limits = new Map([["a", { weight: 1, runningGpus: null, queuedJobs: 10, credits: { limit: 100, used: 40, perGpuSecond } }]]);
    const decide = (running: Array<[string, number]>) =>
      decidePass(
        [card("node-a", "GPU-1"), card("node-a", "GPU-2")],
        { held: new Set(), queue: jobs, inFlightByCard: new Map([["a", new Map(running)]]) },
        0,
        limits,
      );
    // 100 - 40 - (10 × 1 + 20 × 0.5) = 40 left: j1 reserves 30 × 0.5 = 15, j2 15 more.
    expect(
      decide([
        ["Dear", 10],
        ["Cheap", 20],
      ]).placements.map((p) => p.jobId),
    ).toEqual(["j1", "j2"]);
    // 100 - 40 - 50 × 1 = 10 left: j1 takes it all, j2 waits on the credits its account's running jobs reserved.
    const [waiting] = decide([["Dear", 50]]).waiting;
    expect(waiting).toEqual({ jobId: "j2", reason: "QUOTA_EXCEEDED", quota: "credits", reserved: true });
    expect(waitingReason(waiting, null)).toBe(
      "monthly credits quota of the account reserved by its running jobs (timeoutSeconds × GPUs × their price): waiting for one to end",
    );
    expect(decide([["Dear", 60]]).placements).toEqual([]);
  });

  test.each([
    [{ code: 422, name: "ValidationError" }, true],
    [{ code: 400, name: "MoleculerClientError" }, true],
    [{ code: 404, name: "ServiceNotFoundError" }, false],
    [{ code: 400, name: "ServiceNotFoundError" }, false],
    [{ code: "ECONNREFUSED", name: "Error" }, false],
  ])("gpu-scheduler placement loop - a node's refusal %o is permanent: %s", (err, permanent) => {
    expect(isPermanentRejection(err)).toBe(permanent);
  });
});

describe("gpu-scheduler placement loop - on fakes", () => {
  const setUp = () => {
    const { clock, store, nodes, view, writer, stopper } = fakeCluster();
    const loop = new PlacementLoop(store, writer, view, nodes, stopper, clock, quiet);
    return { clock, store, nodes, view, loop };
  };

  test("gpu-scheduler placement loop - a placed job is handed to its node and is the node's once accepted, with no start time until it starts", async () => {
    const { clock, store, nodes, view, loop } = setUp();
    view.heard(heartbeat("node-a", ["GPU-1"]), clock.ms);
    const first = store.add(randomUUID());
    const a100 = store.add(randomUUID(), { gpuType: "A100" });
    await loop.schedule({ newJob: true });
    await until(() => store.get(first).status === "running", "the first job to run");
    expect(nodes.runs).toEqual([{ jobId: first, gpuUuid: "GPU-1", gpuUuids: ["GPU-1"], command: "true", attempt: 1, nodeId: "node-a" }]);
    expect(store.get(first)).toMatchObject({ startedAt: null, holding: true }); // the node's started event brings it
    expect(store.get(a100).status).toBe("queued");
    expect(new Map([...loop.waiting].map(([id, w]) => [id, w.reason]))).toEqual(new Map([[a100, "NO_MATCHING_GPU"]]));
    await loop.stop();
  });

  test("gpu-scheduler placement loop - after a pass that left jobs waiting, the next pass reads the queue without asking first whether any job waits", async () => {
    const { clock, store, nodes, view, loop } = setUp();
    const asked = jest.spyOn(store, "anyQueued");
    view.heard(heartbeat("node-a", ["GPU-1"]), clock.ms);
    await loop.schedule(); // nothing queued: asked once, nothing read
    expect(asked).toHaveBeenCalledTimes(1);
    const [first, second] = [store.add(randomUUID()), store.add(randomUUID())];
    await loop.schedule({ newJob: true });
    await until(() => store.get(first).status === "running", "the first job to run");
    expect(store.get(second).status).toBe("queued");
    // The card is freed: the pass places the waiting job with no anyQueued round trip.
    store.get(first).status = "completed";
    store.get(first).holding = false;
    await loop.schedule();
    await until(() => store.get(second).status === "running", "the second job to run");
    expect(asked).toHaveBeenCalledTimes(1);
    expect(nodes.runs.map((r) => r.jobId)).toEqual([first, second]);
    // That pass took every free card, so the next one reads the queue again, finds it empty, and the one after asks first.
    await loop.schedule();
    expect(asked).toHaveBeenCalledTimes(1);
    await loop.schedule();
    expect(asked).toHaveBeenCalledTimes(2);
    await loop.stop();
  });

  test("gpu-scheduler placement loop - a node that refuses the request fails the job with its reason", async () => {
    const { clock, store, nodes, view, loop } = setUp();
    view.heard(heartbeat("node-a", ["GPU-1"]), clock.ms);
    nodes.onRun = async () => Promise.reject(Object.assign(new Error("bad image"), { code: 422, name: "ValidationError" }));
    const id = store.add(randomUUID());
    await loop.schedule({ newJob: true });
    await until(() => store.get(id).status === "failed", "the job to fail");
    expect(store.get(id)).toMatchObject({ holding: false, errorMessage: "The GPU node refused the job: bad image", completedAt: clock.now() });
    await loop.stop();
  });

  test("gpu-scheduler placement loop - an unreachable node: the job goes back to the queue and the node gets no more placements", async () => {
    const { clock, store, nodes, view, loop } = setUp();
    view.heard(heartbeat("node-a", ["GPU-1"]), clock.ms);
    nodes.onRun = async () => Promise.reject(Object.assign(new Error("timed out"), { code: 504, name: "RequestTimeoutError" }));
    const id = store.add(randomUUID());
    await loop.schedule({ newJob: true });
    await until(() => nodes.runs.length === 1 && store.get(id).status === "queued" && !loop.isDispatching(id), "the job back in the queue");
    expect(store.get(id)).toMatchObject({ nodeId: null, gpuUuid: null, holding: false });
    expect(view.schedulableCards()).toEqual([]);
    await loop.stop();
  });

  test("gpu-scheduler placement loop - a job cancelled while its run call was on its way is stopped on the node", async () => {
    const { clock, store, nodes, view, loop } = setUp();
    view.heard(heartbeat("node-a", ["GPU-1"]), clock.ms);
    const id = store.add(randomUUID());
    nodes.onRun = async () => {
      Object.assign(store.get(id), { status: "cancelled", completedAt: clock.now() }); // the client's cancel
    };
    await loop.schedule({ newJob: true });
    await until(() => !store.get(id).holding, "the card to be freed");
    expect(store.get(id).status).toBe("cancelled");
    expect(nodes.cancels).toEqual([{ nodeId: "node-a", jobId: id }]);
    await loop.stop();
  });
});
