import { LogFollowers } from "../../services/gpu-node/log-follow";
import { FollowedJob, FollowedJobs, standing } from "../../services/gpu-scheduler/streams/log-follow";
import { waitFor } from "../support/platform";

const job = (over: Partial<FollowedJob>): FollowedJob => ({ id: "j", status: "running", attempts: 1, nodeId: "n1", ...over });

describe("gpu follow - where a followed attempt stands", () => {
  test.each<[string, Partial<FollowedJob>, number, string]>([
    ["queued, never placed: attempt 1 is to come", { status: "queued", attempts: 0, nodeId: null }, 1, "unstarted"],
    ["cancelled while queued: attempt 1 never starts", { status: "cancelled", attempts: 0, nodeId: null }, 1, "never"],
    ["placed, not yet confirmed: its log may grow", { status: "assigned" }, 1, "growing"],
    ["running: its log grows", {}, 1, "growing"],
    ["completed: the last attempt, ended", { status: "completed" }, 1, "last"],
    ["back in the queue for a retry: attempt 1 ended, more to come", { status: "queued", nodeId: null }, 1, "ended"],
    ["back in the queue for a retry: attempt 2 is to come", { status: "queued", nodeId: null }, 2, "unstarted"],
    ["running attempt 2: attempt 1 ended", { attempts: 2 }, 1, "ended"],
    ["failed after its retries: attempt 2 is the last", { status: "failed", attempts: 2 }, 2, "last"],
  ])("%s", (_name, over, attempt, expected) => {
    expect(standing(job(over), attempt)).toBe(expected);
  });
});

describe("gpu follow - the node's followers of growing logs", () => {
  const sizes = new Map<string, number>();
  const followers = new LogFollowers(10, async (file) => sizes.get(file) ?? 0);

  test("gpu follow - a wait ends when the file grows past its offset, and only then", async () => {
    sizes.set("a", 5);
    let done = false;
    const waiting = followers.wait("f1", "a", 5, 10_000, () => true).then(() => (done = true));
    await waitFor(() => followers.waiting === 1, { message: "waiting" });
    expect(done).toBe(false);
    sizes.set("a", 6);
    await waiting;
    expect(followers.waiting).toBe(0);
  });

  test("gpu follow - a wait ends when the attempt stops running, and on stop; a stopped follow never waits again", async () => {
    let live = true;
    const ended = followers.wait("f2", "b", 0, 10_000, () => live);
    live = false;
    await ended;
    const stopped = followers.wait("f3", "b", 0, 10_000, () => true);
    await waitFor(() => followers.waiting === 1, { message: "waiting" });
    expect(followers.stop("f3")).toBe(true);
    await stopped;
    // Resolves at once (a 10 s wait would outlast the test's own timeout).
    await followers.wait("f3", "b", 0, 10_000, () => true);
    expect(followers.waiting).toBe(0);
  });
});

describe("gpu follow - the followed jobs' rows, read once a second per replica", () => {
  const ALICE = "a";
  const row = { id: "j", clientId: ALICE, status: "running" as const, attempts: 1, nodeId: "n1" };

  test("gpu follow - many pages of one job read its row once; a status change or a second later reads it again; another account gets nothing", async () => {
    let now = 0;
    let reads = 0;
    const jobs = new FollowedJobs(
      async () => {
        reads++;
        return { ...row };
      },
      1000,
      () => now,
    );
    await Promise.all(Array.from({ length: 10 }, () => jobs.get("j", ALICE)));
    expect(reads).toBe(1);
    expect(await jobs.get("j", "bob")).toBeUndefined();
    expect(reads).toBe(1);
    jobs.forget("j");
    await jobs.get("j", ALICE);
    expect(reads).toBe(2);
    now = 1001;
    expect(await jobs.get("j", ALICE)).toMatchObject({ status: "running" });
    expect(reads).toBe(3);
  });

  test("gpu follow - a job that does not exist is undefined, and a failed read is not kept", async () => {
    let fail = true;
    const jobs = new FollowedJobs(async () => {
      if (fail) throw new Error("database down");
      return undefined;
    });
    await expect(jobs.get("x", ALICE)).rejects.toThrow("database down");
    fail = false;
    expect(await jobs.get("x", ALICE)).toBeUndefined();
  });
});
