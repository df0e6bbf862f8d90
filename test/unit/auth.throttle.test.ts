import { MemoryRateLimiter } from "../../lib/rate-limiter";
import { LoginThrottle } from "../../services/auth/throttle";

describe("auth - login throttle", () => {
  const make = () => new LoginThrottle(new MemoryRateLimiter(() => 0), { perAddress: 100, perEmail: 3, windowS: 60 });

  it("auth - failures block that (e-mail, address) pair only", async () => {
    const throttle = make();
    for (let i = 0; i < 3; i++) {
      expect((await throttle.beforeLogin("victim@example.com", "6.6.6.6")).allowed).toBe(true);
      await throttle.loginFailed("victim@example.com", "6.6.6.6");
    }
    expect(await throttle.beforeLogin("victim@example.com", "6.6.6.6")).toEqual({ allowed: false, retryAfterS: 60 });
    expect(await throttle.beforeLogin("VICTIM@example.com", "6.6.6.6")).toMatchObject({ allowed: false });
    expect((await throttle.beforeLogin("victim@example.com", "1.2.3.4")).allowed).toBe(true); // the owner elsewhere
    expect((await throttle.beforeLogin("other@example.com", "6.6.6.6")).allowed).toBe(true);
  });

  it("auth - successful attempts do not count as failures", async () => {
    const throttle = make();
    for (let i = 0; i < 10; i++) expect((await throttle.beforeLogin("a@example.com", "1.1.1.1")).allowed).toBe(true);
  });

  it("auth - every attempt counts against the address", async () => {
    const throttle = new LoginThrottle(new MemoryRateLimiter(() => 0), { perAddress: 2, perEmail: 100, windowS: 60 });
    expect((await throttle.beforeLogin("a@example.com", "9.9.9.9")).allowed).toBe(true);
    expect((await throttle.register("b@example.com", "9.9.9.9")).allowed).toBe(true);
    expect((await throttle.beforeLogin("c@example.com", "9.9.9.9")).allowed).toBe(false);
  });
});
