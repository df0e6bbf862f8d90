/**
 * services/api-gateway/stream-slots.ts: which calls count as streams (from the action's
 * `streams`), and an account's slots held until each response closes.
 */
import { EventEmitter } from "events";
import type { ServerResponse } from "http";
import { StreamSlots, streamsFor } from "../../services/api-gateway/stream-slots";

/** A response: `close()` emits close once, as Node's does however the response ends. */
const response = (destroyed = false) => {
  const res = Object.assign(new EventEmitter(), { destroyed });
  return { res: res as unknown as ServerResponse, close: () => res.emit("close") };
};

describe("gateway stream slots", () => {
  it.each<[string, { streams?: true | { param: string } } | undefined, unknown, boolean]>([
    ["an action without streams", {}, { stream: true }, false],
    ["an unknown action", undefined, {}, false],
    ["streams: true, whatever its params", { streams: true }, undefined, true],
    ["streams by a param that is true", { streams: { param: "stream" } }, { stream: true }, true],
    ["streams by a param that is false", { streams: { param: "stream" } }, { stream: false }, false],
    ["streams by a param that is only truthy (the action refuses it)", { streams: { param: "stream" } }, { stream: "yes" }, false],
    ["streams by a param that is absent", { streams: { param: "stream" } }, {}, false],
    ["streams by a param, no params at all", { streams: { param: "stream" } }, null, false],
  ])("gateway stream slots - %s", (_name, action, params, expected) => {
    expect(streamsFor(action, params)).toBe(expected);
  });

  it("gateway stream slots - up to the limit per account, then 429 with what is used; each close gives one back", () => {
    const slots = new StreamSlots(2);
    const [a, b, c] = [response(), response(), response()];
    slots.hold("alice", a.res);
    slots.hold("alice", b.res);
    expect(() => slots.hold("alice", c.res)).toThrow(
      expect.objectContaining({ type: "RATE_LIMITED", data: { retryAfter: 1, resource: "streams", limit: 2, used: 2 } }),
    );
    expect(slots.held("alice")).toBe(2);
    slots.hold("bob", c.res); // another account's slots are its own
    expect(slots.held("bob")).toBe(1);
    a.close();
    expect(slots.held("alice")).toBe(1);
    const d = response();
    slots.hold("alice", d.res);
    expect(slots.held("alice")).toBe(2);
    b.close();
    d.close();
    c.close();
    expect([slots.held("alice"), slots.held("bob")]).toEqual([0, 0]);
  });

  it("gateway stream slots - a client already gone holds nothing (its close will not come again)", () => {
    const slots = new StreamSlots(1);
    slots.hold("alice", response(true).res);
    expect(slots.held("alice")).toBe(0);
    slots.hold("alice", response().res);
    expect(slots.held("alice")).toBe(1);
  });

  it("gateway stream slots - unlimited: never refused", () => {
    const slots = new StreamSlots(null);
    for (let i = 0; i < 1000; i++) slots.hold("alice", response().res);
    expect(slots.held("alice")).toBe(1000);
  });
});
