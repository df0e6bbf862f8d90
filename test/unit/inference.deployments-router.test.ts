/**
 * The deployment router's reads of a deployment's replicas (issue 29): one read serves a request's
 * prepare and pick (and the next moments' requests), the ready replica with the fewest requests in
 * flight is picked, one the controller marked ended is never picked once it said so, and one a
 * request could not reach is passed over for a while, the request going to the next. A fake
 * repository (no database), a clock the test moves; the links are real, and their node refuses
 * every connection.
 */
import { specOf } from "../../services/inference/deployments/contract";
import { ReplicaLinks } from "../../services/inference/deployments/links";
import type { DeploymentRow, ReplicaRow } from "../../services/inference/deployments/repository";
import { DeploymentRouter } from "../../services/inference/deployments/router";
import { type Provider, ProviderFailure } from "../../services/inference/providers/types";

const CLIENT = "client-1";
const deployment: DeploymentRow = {
  id: "d1",
  client_id: CLIENT,
  name: "mine",
  spec: specOf({ name: "mine", command: "serve", port: 8000 }),
  env: {},
  status: "ready",
  status_reason: null,
  failures: 0,
  desired: 2,
  wanted_at: null,
  last_request_at: null,
  created_at: new Date(0),
};
const replica = (job: string): ReplicaRow => ({
  job_id: job,
  deployment_id: "d1",
  node_id: "gpu-node.n1",
  model_id: `model-${job}`,
  ready_at: new Date(0),
  stopping_at: null,
  ended_at: null,
  created_at: new Date(0),
});

function setup() {
  const clock = { now: 1000 };
  let live = [replica("a"), replica("b")];
  const reads = { replicas: 0 };
  const links = new ReplicaLinks(() => ({
    latin1: () => true,
    call: () => Promise.reject(new Error("no bus in this test")),
  }));
  const router = new DeploymentRouter({
    repo: {
      listForClient: async () => [deployment],
      findForClient: async () => deployment,
      liveReplicas: async () => (reads.replicas++, live.filter((r) => r.ended_at === null)),
      touch: async () => undefined,
    },
    links,
    poke: () => undefined,
    now: () => clock.now,
  });
  const request = async () => {
    expect(await router.prepare(CLIENT, "mine")).toEqual({ coldStart: false });
    return (await router.pick(CLIENT, "mine"))?.entry.upstreamId;
  };
  const end = (job: string) => (live = live.map((r) => (r.job_id === job ? { ...r, ended_at: new Date(1) } : r)));
  const stopping = (job: string) => (live = live.map((r) => (r.job_id === job ? { ...r, stopping_at: new Date(1) } : r)));
  return { router, links, reads, request, end, stopping, clock };
}

/** One chat request through `provider` (the model id as the engine sends it: the first replica's). */
const chat = (provider: Provider, model: string) => provider.complete({ model, messages: [{ role: "user", content: "hi" }] }, new AbortController().signal);

describe("inference deployments router", () => {
  it("inference deployments router - a request reads the replicas once for prepare and pick, and the next ones reuse it", async () => {
    const { reads, request } = setup();
    await request();
    expect(reads.replicas).toBe(1);
    await request();
    await request();
    expect(reads.replicas).toBe(1);
  });

  it("inference deployments router - the ready replica with the fewest requests in flight is picked", async () => {
    const { links, request } = setup();
    links.get("a", "gpu-node.n1").agent.inflight = 3;
    links.get("b", "gpu-node.n1").agent.inflight = 1;
    expect(await request()).toBe("model-b");
    links.get("b", "gpu-node.n1").agent.inflight = 5;
    expect(await request()).toBe("model-a");
    links.clear();
  });

  it("inference deployments router - a replica the controller marked ended is not picked once it said so, however few it serves", async () => {
    const { router, links, reads, request, end } = setup();
    links.get("a", "gpu-node.n1").agent.inflight = 0;
    links.get("b", "gpu-node.n1").agent.inflight = 9;
    expect(await request()).toBe("model-a");
    end("a");
    router.replicasChanged("d1");
    expect(await request()).toBe("model-b");
    expect(reads.replicas).toBe(2);
    links.clear();
  });

  it("inference deployments router - a request its replica's node refuses goes to the next replica, with its model id; the refused one is passed over for 5 s", async () => {
    const { router, links, request, clock } = setup();
    links.get("a", "gpu-node.n1").agent.inflight = 0;
    links.get("b", "gpu-node.n1").agent.inflight = 9;
    const picked = (await router.pick(CLIENT, "mine"))!;
    expect(picked.entry.upstreamId).toBe("model-a");
    // a's node refuses (no bus here); b answers.
    const asked: string[] = [];
    const refused = links.get("a", "gpu-node.n1").provider;
    const complete = refused.complete.bind(refused);
    jest.spyOn(refused, "complete").mockImplementation((req, signal) => (asked.push(`a:${req.model}`), complete(req, signal)));
    jest
      .spyOn(links.get("b", "gpu-node.n1").provider, "complete")
      .mockImplementation(async (req) => (asked.push(`b:${req.model}`), { text: "from b", promptTokens: 1, completionTokens: 2 }) as never);
    await expect(chat(picked.provider, "model-a")).resolves.toMatchObject({ text: "from b" });
    expect(asked).toEqual(["a:model-a", "b:model-b"]);
    // a is passed over for 5 s, though it serves fewer.
    expect(await request()).toBe("model-b");
    clock.now += 4999;
    expect(await request()).toBe("model-b");
    clock.now += 2;
    expect(await request()).toBe("model-a");
    links.clear();
  });

  it("inference deployments router - when every replica's node refuses, each is tried once and the last refusal is the answer", async () => {
    const { router, links } = setup();
    const picked = (await router.pick(CLIENT, "mine"))!;
    await expect(chat(picked.provider, "model-a")).rejects.toMatchObject({ kind: "unavailable", notSent: true });
    links.clear();
  });

  it("inference deployments router - a request that reached its replica is never sent again, whatever the failure", async () => {
    const { router, links } = setup();
    links.get("a", "gpu-node.n1").agent.inflight = 0;
    links.get("b", "gpu-node.n1").agent.inflight = 9;
    const picked = (await router.pick(CLIENT, "mine"))!;
    jest
      .spyOn(links.get("a", "gpu-node.n1").provider, "complete")
      .mockRejectedValue(new ProviderFailure("error", "Model provider closed the connection mid-response"));
    const other = jest.spyOn(links.get("b", "gpu-node.n1").provider, "complete");
    await expect(chat(picked.provider, "model-a")).rejects.toMatchObject({
      kind: "error",
    });
    expect(other).not.toHaveBeenCalled();
    links.clear();
  });

  it("inference deployments router - a replica being stopped (scale-down) takes no new request, though ready and idle", async () => {
    const { router, links, request, stopping } = setup();
    links.get("a", "gpu-node.n1").agent.inflight = 0;
    links.get("b", "gpu-node.n1").agent.inflight = 9;
    expect(await request()).toBe("model-a");
    stopping("a");
    router.replicasChanged("d1");
    expect(await request()).toBe("model-b");
    expect(await request()).toBe("model-b");
    links.clear();
  });
});
