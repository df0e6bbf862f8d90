/** LruCache: bounded, the least recently used entry goes first, a hit counts as a use. */
import { LruCache } from "../../lib/lru-cache";

const keysOf = (c: LruCache<string, number>, keys: string[]) => keys.filter((k) => c.get(k) !== undefined);

describe("lru cache", () => {
  test("lru cache - over the bound the least recently used goes, a hit (repeated or not) counts as a use", () => {
    const c = new LruCache<string, number>(3);
    c.set("a", 1);
    c.set("b", 2);
    c.set("c", 3);
    expect(c.get("a")).toBe(1); // a is now the newest
    expect(c.get("a")).toBe(1); // the newest asked again: still the newest
    c.set("d", 4); // b goes
    expect(c.size).toBe(3);
    expect(c.get("b")).toBeUndefined();
    c.set("e", 5); // c goes (a, d, e stay)
    expect(keysOf(c, ["a", "c", "d", "e"])).toEqual(["a", "d", "e"]);
  });

  test("lru cache - the newest deleted, then set again: order is kept", () => {
    const c = new LruCache<string, number>(2);
    c.set("a", 1);
    c.set("b", 2);
    c.delete("b");
    expect(c.get("b")).toBeUndefined();
    c.set("c", 3);
    expect(c.get("a")).toBe(1); // a newest now
    c.set("d", 4); // c goes
    expect(keysOf(c, ["a", "c", "d"])).toEqual(["a", "d"]);
  });

  test("lru cache - a bound of one keeps only the last set", () => {
    const c = new LruCache<string, number>(1);
    c.set("a", 1);
    c.set("b", 2);
    expect(keysOf(c, ["a", "b"])).toEqual(["b"]);
  });
});
