import { MemoryRateLimiter } from "../../lib/rate-limiter";

describe("auth - in-process rate limiter", () => {
  it("auth - allows up to the limit, then refuses until the window ends", async () => {
    let now = 1_000_000;
    const limiter = new MemoryRateLimiter(() => now);
    for (let i = 0; i < 3; i++) expect((await limiter.hit("k", 3, 60)).allowed).toBe(true);
    const refused = await limiter.hit("k", 3, 60);
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterS).toBe(60);
    now += 30_000;
    expect((await limiter.hit("k", 3, 60)).retryAfterS).toBe(30);
    now += 30_001;
    expect((await limiter.hit("k", 3, 60)).allowed).toBe(true);
  });
  it("auth - keys are counted apart", async () => {
    const limiter = new MemoryRateLimiter(() => 0);
    expect((await limiter.hit("a", 1, 60)).allowed).toBe(true);
    expect((await limiter.hit("b", 1, 60)).allowed).toBe(true);
    expect((await limiter.hit("a", 1, 60)).allowed).toBe(false);
  });
});
