/**
 * Where snapshot dumps live: a directory (DBAAS_SNAPSHOT_DIR; a volume in compose, a
 * PersistentVolumeClaim on Kubernetes, shared by every dbaas replica). A dump is written under a
 * temporary name and renamed once pg_dump succeeded, so a dump under its final name is complete.
 * File names are snapshot ids only: nothing a client sends becomes a path.
 */
import { promises as fs } from "fs";
import path from "path";
import { isUuid } from "../../lib/uuid";

const PARTIAL = ".partial";
const DUMP = ".dump";

export class SnapshotStore {
  constructor(readonly dir: string) {}

  async init(): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
  }

  /** Where pg_dump writes the snapshot before it is complete. */
  partialPath(id: string): string {
    return path.join(this.dir, `${checkId(id)}${PARTIAL}`);
  }

  /** The complete dump (pg_restore reads it). */
  pathOf(id: string): string {
    return path.join(this.dir, `${checkId(id)}${DUMP}`);
  }

  /** Makes the written dump the snapshot's; its size in bytes. */
  async commit(id: string): Promise<number> {
    await fs.rename(this.partialPath(id), this.pathOf(id));
    return (await fs.stat(this.pathOf(id))).size;
  }

  /** Removes the dump, complete or not; nothing when there is none. */
  async remove(id: string): Promise<void> {
    await Promise.all([fs.rm(this.pathOf(id), { force: true }), fs.rm(this.partialPath(id), { force: true })]);
  }

  /** Ids of every dump in the store, complete or not (other files are not ours and left alone). */
  async ids(): Promise<string[]> {
    const names = await fs.readdir(this.dir).catch(() => [] as string[]);
    const ids = names.map((n) => n.replace(/\.(dump|partial)$/, "")).filter((n) => isUuid(n));
    return [...new Set(ids)];
  }
}

function checkId(id: string): string {
  if (!isUuid(id)) throw new Error(`Refusing a snapshot id that is not a uuid: ${JSON.stringify(id)}`);
  return id;
}
