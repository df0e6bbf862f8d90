/**
 * dbaas with pg_dump / pg_restore of another major version than the tenant server: it starts
 * (databases keep working), says why in its log, and refuses snapshots and branches with 503.
 */
import { promises as fs } from "fs";
import os from "os";
import path from "path";
import { randomUUID } from "crypto";
import type { TestPlatform } from "../support/platform";
import { callerMeta, dbaasApp, startDbaasPlatform, stopDbaasPlatform } from "./dbaas.helpers";

describe("dbaas tools", () => {
  let platform: TestPlatform;
  let binDir: string;

  beforeAll(async () => {
    binDir = await fs.mkdtemp(path.join(os.tmpdir(), "ci-pg-bin-"));
    for (const tool of ["pg_dump", "pg_restore"]) {
      const file = path.join(binDir, tool);
      await fs.writeFile(file, `#!/bin/sh\necho "${tool} (PostgreSQL) 9.6.24"\n`);
      await fs.chmod(file, 0o755);
    }
    platform = await startDbaasPlatform({ env: { DBAAS_PG_BIN_DIR: binDir } });
  });
  afterAll(async () => {
    await stopDbaasPlatform(platform);
    await fs.rm(binDir, { recursive: true, force: true });
  });

  it("dbaas tools - tools of another major: databases work, snapshots and branches are 503, and the reason (logged at start) names the fix", async () => {
    const meta = callerMeta();
    const db = await platform.broker.call<{ id: string; databaseName: string }, object>("dbaas.create", {}, { meta });
    const service = dbaasApp(platform);
    const reason = await service.snapshotsBlocked;
    expect(reason).toMatch(
      /major version \d+, but pg_dump is version 9 and pg_restore is version 9 \(install postgresql-client-\d+, or set DBAAS_PG_BIN_DIR\)/,
    );
    await expect(platform.broker.call("dbaas.createSnapshot", { id: db.id }, { meta })).rejects.toMatchObject({ code: 503, type: "SERVICE_UNAVAILABLE" });
    expect(await platform.broker.call("dbaas.listSnapshots", {}, { meta })).toEqual({ snapshots: [] });
    // A ready snapshot (taken before the tools changed) cannot be branched from either.
    const id = randomUUID();
    await service.snapshots.insertPending({ id, clientId: meta.caller.clientId, databaseId: db.id, databaseName: db.databaseName, owner: randomUUID() });
    await service.snapshots.markReady(id, 1);
    await expect(platform.broker.call("dbaas.create", { fromSnapshot: id }, { meta })).rejects.toMatchObject({ code: 503, type: "SERVICE_UNAVAILABLE" });
    expect(((await platform.broker.call("dbaas.list", {}, { meta })) as { databases: unknown[] }).databases).toHaveLength(1);
  });
});
