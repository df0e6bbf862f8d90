import { mkdir, mkdtemp, readdir, rm, writeFile } from "fs/promises";
import { tmpdir } from "os";
import path from "path";
import { isInstant, PointInTime } from "../../services/dbaas/pitr";
import { PitrStore } from "../../services/dbaas/pitr-store";
import type { PitrDeps } from "../../services/dbaas/pitr";

describe("dbaas point-in-time restore rules", () => {
  it.each([
    ["2026-11-27T15:04:05Z", true],
    ["2026-11-27T15:04:05.123456+01:00", true],
    ["2026-11-27T15:04:05", false],
    ["2026-11-27 15:04:05Z", false],
    ["2026-02-30T10:00:00Z", false],
    ["2026-11-27T24:00:00Z", false],
    ["yesterday", false],
    ["", false],
  ])("dbaas pitr - %j is an instant: %s", (text, expected) => {
    expect(isInstant(text)).toBe(expected);
  });

  it("dbaas pitr - the window starts at the latest of oldest backup end, the database made and filled, and retention; ends now or at destruction", async () => {
    const now = new Date("2026-11-27T12:00:00Z");
    const backups = [{ id: "b", dir: "/x", startedAt: new Date("2026-11-26T00:00:00Z"), endedAt: new Date("2026-11-26T00:01:00Z") }];
    const pitr = new PointInTime({ store: { list: async () => backups }, retentionMs: 24 * 3_600_000, now: () => now } as unknown as PitrDeps);
    const created = new Date("2026-11-27T10:00:00Z");
    expect(await pitr.window({ activeAt: created, destroyedAt: null })).toEqual({ earliest: created.toISOString(), latest: now.toISOString() });
    expect(await pitr.window({ activeAt: new Date("2026-11-20T00:00:00Z"), destroyedAt: null })).toEqual({
      earliest: "2026-11-26T12:00:00.000Z",
      latest: now.toISOString(),
    });
    const destroyed = new Date("2026-11-27T11:00:00Z");
    expect(await pitr.window({ activeAt: created, destroyedAt: destroyed })).toEqual({ earliest: created.toISOString(), latest: destroyed.toISOString() });
    backups.length = 0;
    expect(await pitr.window({ activeAt: created, destroyedAt: null })).toBeUndefined();
  });

  it("dbaas pitr - leftovers of a dead process go at start: partial backups and scratch folders, complete backups stay", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "dbaas-pitr-unit-"));
    try {
      const store = new PitrStore(root, path.join(root, "wal"), (tool) => tool);
      await store.init();
      await mkdir(path.join(root, "base", "b1.partial"));
      await mkdir(path.join(root, "base", "b2"));
      await writeFile(
        path.join(root, "base", "b2", "dbaas-backup.json"),
        JSON.stringify({ startedAt: "2026-11-27T10:00:00Z", endedAt: "2026-11-27T10:01:00Z" }),
      );
      await mkdir(path.join(root, "scratch-abc", "data"), { recursive: true });
      await writeFile(path.join(root, "scratch-abc", "data", "postmaster.pid"), `${process.pid}\n`); // not a postgres of that folder: not signalled
      await store.removePartialBackups();
      await store.removeScratchLeftovers();
      expect((await readdir(path.join(root, "base"))).sort()).toEqual(["b2"]);
      expect((await readdir(root)).sort()).toEqual(["base"]);
      expect((await store.list()).map((b) => b.id)).toEqual(["b2"]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
