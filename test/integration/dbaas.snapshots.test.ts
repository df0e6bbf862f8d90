/**
 * Snapshots against the real tenant cluster and real pg_dump: consistent while a writer inserts,
 * owned by the account, kept after the database is destroyed, counted in the account's storage,
 * bounded per server, failed (never orphaned) by a fault after each step or a process that died.
 */
import { spawnSync } from "child_process";
import { randomUUID } from "crypto";
import { existsSync, promises as fs } from "fs";
import path from "path";
import type { TestPlatform } from "../support/platform";
import { waitFor } from "../support/platform";
import { SNAPSHOT_STEPS, Snapshotter, SnapshotStep } from "../../services/dbaas/snapshotter";
import { asAdmin, callerMeta, dbaasApp, startDbaasPlatform, stopDbaasPlatform, TENANT_ADMIN_URL, withClient } from "./dbaas.helpers";

type Created = { id: string; databaseName: string; connectionString: string };
type Snap = { id: string; databaseId: string; databaseName: string; status: string; sizeMb: number; createdAt: string };

export const SNAPSHOT_KEYS = ["createdAt", "databaseId", "databaseName", "id", "sizeMb", "status"];

describe("dbaas snapshots", () => {
  let platform: TestPlatform;
  let dir: string;
  const owner = callerMeta();
  const internals = () => dbaasApp(platform);
  const call = <T>(action: string, params: object, meta = owner) => platform.broker.call<T, object>(`dbaas.${action}`, params, { meta });
  const create = () => call<Created>("create", {});
  const snapshot = (id: string, meta = owner) => call<Snap>("createSnapshot", { id }, meta);
  const settled = async (id: string, meta = owner) => {
    await internals().snapshotter.settled();
    return call<Snap>("getSnapshot", { id }, meta);
  };

  beforeAll(async () => {
    platform = await startDbaasPlatform({ env: { DBAAS_SNAPSHOT_CONCURRENCY: "1", DBAAS_MAX_PER_ACCOUNT: "10", DBAAS_SNAPSHOTS_PER_ACCOUNT: "100" } });
    dir = platform.env.DBAAS_SNAPSHOT_DIR!;
  });
  afterAll(() => stopDbaasPlatform(platform));

  it("dbaas snapshots - a snapshot taken while a writer inserts is consistent", async () => {
    const db = await create();
    await withClient(db.connectionString, (c) =>
      c.query(
        "CREATE TABLE a_filler AS SELECT g AS n, repeat('x', 200) AS pad FROM generate_series(1, 100000) g; CREATE TABLE t (n int); CREATE TABLE u (n int)",
      ),
    );
    let stop = false;
    let written = 0;
    // Each transaction writes one row to t and one to u: any consistent copy has the same rows in both.
    const writer = withClient(db.connectionString, async (c) => {
      while (!stop) {
        const n = written + 1;
        await c.query(`BEGIN; INSERT INTO t VALUES (${n}); INSERT INTO u VALUES (${n}); COMMIT`);
        written = n;
      }
    });
    await waitFor(() => written > 20, { message: "the writer" });
    const snap = await snapshot(db.id);
    await waitFor(async () => (await call<Snap>("getSnapshot", { id: snap.id })).status !== "pending", { timeoutMs: 60_000, message: "the snapshot" });
    const writtenWhenReady = written;
    stop = true;
    await writer;
    expect((await call<Snap>("getSnapshot", { id: snap.id })).status).toBe("ready");

    // Restore the dump with the bare tool into a scratch database and compare the tables.
    const scratch = `scratch_${randomUUID().slice(0, 8)}`;
    await asAdmin((c) => c.query(`CREATE DATABASE ${scratch}`));
    try {
      const url = new URL(TENANT_ADMIN_URL);
      url.pathname = `/${scratch}`;
      const restore = spawnSync("pg_restore", ["--no-owner", "--no-acl", "-d", url.toString(), path.join(dir, `${snap.id}.dump`)], { encoding: "utf8" });
      expect(restore.stderr).toBe("");
      const counts = await asAdmin(
        async (c) =>
          (
            await c.query(
              "SELECT (SELECT count(*) FROM t)::int AS t, (SELECT count(*) FROM u)::int AS u, (SELECT max(n) FROM t) AS last, (SELECT count(*) FROM a_filler)::int AS filler",
            )
          ).rows[0],
        scratch,
      );
      expect(counts.filler).toBe(100000);
      expect(counts.t).toBeGreaterThan(20);
      expect(counts.t).toBeLessThanOrEqual(writtenWhenReady);
      // t and u were dumped at different moments, from one transaction's snapshot: the same rows, 1..n, in both.
      expect([counts.u, counts.last]).toEqual([counts.t, counts.t]);
    } finally {
      await asAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${scratch} WITH (FORCE)`));
    }
  });

  it("dbaas snapshots - shapes, newest first, storage counted, kept after the database is destroyed, then deleted with its dump", async () => {
    const meta = callerMeta();
    const db = await call<Created>("create", {}, meta);
    await withClient(db.connectionString, (c) => c.query("CREATE TABLE kept AS SELECT g AS n FROM generate_series(1, 1000) g"));
    const first = await snapshot(db.id, meta);
    expect(Object.keys(first).sort()).toEqual(SNAPSHOT_KEYS);
    expect(first).toMatchObject({ databaseId: db.id, databaseName: db.databaseName, status: "pending", sizeMb: 0 });
    const second = await snapshot(db.id, meta);
    const ready = [await settled(first.id, meta), await settled(second.id, meta)];
    for (const s of ready) expect(s).toMatchObject({ status: "ready" });
    expect(ready[0].sizeMb).toBeGreaterThan(0);

    const listed = await call<{ snapshots: Snap[] }>("listSnapshots", {}, meta);
    expect(listed.snapshots.map((s) => s.id)).toEqual([second.id, first.id]);
    const stranger = randomUUID();
    const storageOf = (clientIds: string[]) => call<Record<string, { bytes: number; storageMb: number }>>("snapshotStorage", { clientIds });
    const storage = await storageOf([meta.caller.clientId, stranger]);
    const sizes = await Promise.all([first.id, second.id].map(async (id) => (await fs.stat(path.join(dir, `${id}.dump`))).size));
    expect(storage).toEqual({ [meta.caller.clientId]: { bytes: sizes[0] + sizes[1], storageMb: (sizes[0] + sizes[1]) / 1048576 } });

    await call("destroy", { id: db.id }, meta);
    expect(await call<Snap>("getSnapshot", { id: first.id }, meta)).toEqual(ready[0]);
    expect(existsSync(path.join(dir, `${first.id}.dump`))).toBe(true);

    expect(await call("deleteSnapshot", { id: first.id }, meta)).toEqual({ message: `Snapshot ${first.id} deleted` });
    expect(existsSync(path.join(dir, `${first.id}.dump`))).toBe(false);
    await expect(call("getSnapshot", { id: first.id }, meta)).rejects.toMatchObject({ code: 404 });
    await expect(call("deleteSnapshot", { id: first.id }, meta)).rejects.toMatchObject({ code: 404 });
    expect((await storageOf([meta.caller.clientId]))[meta.caller.clientId].bytes).toBe(sizes[1]);
    await expect(storageOf(["not-a-uuid"])).rejects.toMatchObject({ code: 422 }); // a bad id reaches no query
  });

  it("dbaas snapshots - another account cannot take, read or delete them (404), bad ids are 404, and a pending one cannot be deleted (409)", async () => {
    const db = await create();
    const stranger = callerMeta();
    await expect(snapshot(db.id, stranger)).rejects.toMatchObject({ code: 404, type: "NOT_FOUND" });
    const snap = await snapshot(db.id);
    await expect(call("deleteSnapshot", { id: snap.id })).rejects.toMatchObject({ code: 409, type: "INVALID_STATE" });
    await settled(snap.id);
    for (const action of ["getSnapshot", "deleteSnapshot"]) {
      await expect(call(action, { id: snap.id }, stranger)).rejects.toMatchObject({ code: 404, type: "NOT_FOUND" });
      for (const id of ["x", "../../etc/passwd", randomUUID()]) await expect(call(action, { id })).rejects.toMatchObject({ code: 404 });
    }
    expect((await call<{ snapshots: Snap[] }>("listSnapshots", {}, stranger)).snapshots).toEqual([]);
    expect((await call<Snap>("getSnapshot", { id: snap.id })).status).toBe("ready");
    expect(existsSync(path.join(dir, `${snap.id}.dump`))).toBe(true);
  });

  it("dbaas snapshots - at most DBAAS_SNAPSHOT_CONCURRENCY (1) pg_dump run at once on the server", async () => {
    const db = await create();
    await withClient(db.connectionString, (c) => c.query("CREATE TABLE big AS SELECT g AS n, repeat('y', 500) AS pad FROM generate_series(1, 50000) g"));
    const snaps = await Promise.all([1, 2, 3].map(() => snapshot(db.id)));
    let most = 0;
    const done = internals().snapshotter.settled();
    let finished = false;
    void done.then(() => (finished = true));
    while (!finished) {
      const n = await asAdmin(
        async (c) =>
          (await c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'pg_dump' AND datname = $1", [db.databaseName])).rows[0].n,
      );
      most = Math.max(most, n);
    }
    for (const s of snaps) expect((await call<Snap>("getSnapshot", { id: s.id })).status).toBe("ready");
    expect(most).toBe(1); // seen running, never two at once
  });

  let shared: Promise<Created> | undefined;
  it.each(SNAPSHOT_STEPS.map((s) => [s]))("dbaas snapshots - a fault after step %s leaves no orphan dump", async (failing) => {
    const db = await (shared ??= create());
    const service = internals();
    const original = service.snapshotter;
    const seen: SnapshotStep[] = [];
    service.snapshotter = new Snapshotter({
      ...original.deps,
      onStep: (step) => {
        seen.push(step);
        if (step === failing) throw new Error(`injected fault after ${step}`);
      },
    });
    try {
      const snap = await snapshot(db.id);
      const after = await settled(snap.id);
      expect(seen[seen.length - 1]).toBe(failing);
      const files = (await fs.readdir(dir)).filter((f) => f.startsWith(snap.id));
      if (failing === "ready") {
        expect([after.status, files]).toEqual(["ready", [`${snap.id}.dump`]]);
      } else {
        expect([after.status, files]).toEqual(["failed", []]);
      }
    } finally {
      service.snapshotter = original;
    }
  });

  it("dbaas snapshots - after a restart, a pending snapshot whose process died is failed and dumps no snapshot keeps are removed", async () => {
    const db = await (shared ??= create());
    const { snapshots, snapshotter } = internals();
    const abandoned = randomUUID();
    await snapshots.insertPending({ id: abandoned, clientId: owner.caller.clientId, databaseId: db.id, databaseName: db.databaseName, owner: randomUUID() });
    const stray = randomUUID();
    await fs.writeFile(path.join(dir, `${abandoned}.partial`), "half a dump");
    await fs.writeFile(path.join(dir, `${stray}.dump`), "nobody's");
    await fs.writeFile(path.join(dir, "README.operator"), "not ours");
    const kept = await snapshot(db.id);
    await settled(kept.id);

    expect(await snapshotter.recover()).toEqual({ failed: 1, removed: 2 });
    expect((await call<Snap>("getSnapshot", { id: abandoned })).status).toBe("failed");
    const files = await fs.readdir(dir);
    expect(files).toContain(`${kept.id}.dump`);
    expect(files).toContain("README.operator");
    expect(files.filter((f) => f.startsWith(abandoned) || f.startsWith(stray))).toEqual([]);
  });
});
