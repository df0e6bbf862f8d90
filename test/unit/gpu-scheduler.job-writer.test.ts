/** Writing transitions by compare-and-set: conflicts are decided again on the new state. */
import { JobWriter } from "../../services/gpu-scheduler/loop/job-writer";
import { confirmPlacement } from "../../services/gpu-scheduler/core/transitions";
import { FakeJobs } from "./gpu-scheduler.fakes";

const AT = new Date("2026-01-01T10:00:00.000Z");
const placed = { status: "assigned" as const, nodeId: "node-a", gpuUuid: "GPU-1", holding: true };

describe("gpu-scheduler job writer", () => {
  test("gpu-scheduler job writer - writes the patches of a batch in one compare-and-set; no patch, no write", async () => {
    const store = new FakeJobs();
    store.add("j1", placed);
    store.add("j2", { ...placed, nodeId: "node-b", gpuUuid: "GPU-2" });
    store.add("j3", { ...placed, status: "running", startedAt: AT });
    const { written, seen } = await new JobWriter(store).applyTo(["j1", "j2", "j3"], (job) => confirmPlacement(job, "node-a"));
    expect(written).toEqual(new Map([["j1", { status: "running" }]]));
    expect([...seen.keys()]).toEqual(["j1", "j2", "j3"]);
    expect(store.writes).toBe(1);
    expect(store.get("j2").status).toBe("assigned");
  });

  test("gpu-scheduler job writer - a job changed behind the decision is decided again on what it became", async () => {
    const store = new FakeJobs();
    store.add("j1", placed);
    let first = true;
    store.beforeWrite = () => {
      if (first) Object.assign(store.get("j1"), { status: "cancelled", completedAt: AT }); // a client's cancel won
      first = false;
    };
    const { written, seen } = await new JobWriter(store).applyTo(["j1"], (job) => confirmPlacement(job, "node-a"));
    expect(written.size).toBe(0);
    expect(seen.get("j1")?.status).toBe("cancelled");
    expect(store.get("j1").status).toBe("cancelled");
  });

  test("gpu-scheduler job writer - a job that keeps changing fails the write after a few attempts", async () => {
    const store = new FakeJobs();
    store.add("j1", placed);
    store.beforeWrite = () => (store.get("j1").holding = !store.get("j1").holding);
    await expect(new JobWriter(store).applyOne("j1", () => ({ startedAt: AT }))).rejects.toThrow(/kept changing/);
    expect(store.writes).toBe(5);
  });
});
