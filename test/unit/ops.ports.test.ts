/** The ports a process claims: derived from PORT, checked before start (lib/port-check.ts). */
import { parsePlatformSettings } from "../../lib/platform-settings";
import { portProblem } from "../../lib/port-check";

describe("ops ports - HEALTH_PORT and METRICS_PORT follow PORT", () => {
  test.each([
    [{}, 3001, 3030],
    [{ PORT: "33000" }, 33001, 33030],
    [{ PORT: "0" }, 0, 0],
    [{ PORT: "65530" }, 65531, 0],
    [{ PORT: "33000", HEALTH_PORT: "4000", METRICS_PORT: "off" }, 4000, null],
  ])("ops ports - %j", (env, health, metrics) => {
    const s = parsePlatformSettings(env);
    expect([s.healthPort, s.metricsPort]).toEqual([health, metrics]);
  });
});

describe("ops ports - a clash is one line naming the variable", () => {
  const free = async () => true;
  test("ops ports - the same port twice", async () => {
    expect(
      await portProblem(
        [
          { variable: "PORT", port: 3001 },
          { variable: "HEALTH_PORT", port: 3001 },
        ],
        undefined,
        free,
      ),
    ).toBe("HEALTH_PORT=3001 is also PORT: set HEALTH_PORT to another port (0: any free one, off: none)");
  });
  test("ops ports - a port in use; 0 and off never clash", async () => {
    const claims = [
      { variable: "PORT", port: 0 },
      { variable: "HEALTH_PORT", port: 0 },
      { variable: "METRICS_PORT", port: null },
    ];
    expect(await portProblem(claims, undefined, async () => false)).toBeUndefined();
    expect(await portProblem([{ variable: "METRICS_PORT", port: 3030 }], undefined, async () => false)).toMatch(/^METRICS_PORT=3030 is in use/);
  });
});
