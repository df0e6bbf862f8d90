/**
 * bench:databases, point-in-time restore — where the platform's restore spends its time, seen
 * from outside while the request runs (the platform is not changed for it): its scratch folder in
 * DBAAS_PITR_DIR appearing (provisioning and the WAL switch done), the scratch postgres's
 * postmaster.pid saying "ready" (copy and recovery done), the dump's last write, the folder gone
 * (pg_restore done, the instance stopped and removed), and the answer.
 */
import { promises as fs } from "fs";
import path from "path";

export type PlatformPhases = { before: number; copyRecovery: number; dump: number; restore: number; answer: number };

/** Polls `pitrDir` every 50 ms while `request` runs; the phases' durations in ms. */
export async function watchRestore(pitrDir: string, request: () => Promise<unknown>): Promise<PlatformPhases> {
  const t0 = performance.now();
  let scratch: string | undefined;
  let seen = NaN;
  let ready = NaN;
  let dumpEnd = NaN;
  let gone = NaN;
  let done = false;
  const poll = async () => {
    while (!done) {
      if (!scratch) {
        const name = (await fs.readdir(pitrDir)).find((n) => n.startsWith("scratch-"));
        if (name) [scratch, seen] = [path.join(pitrDir, name), performance.now()];
      } else if (Number.isNaN(gone)) {
        const pid = await fs.readFile(path.join(scratch, "data", "postmaster.pid"), "utf8").catch(() => undefined);
        if (Number.isNaN(ready) && pid?.split("\n")[7]?.trim() === "ready") ready = performance.now();
        const dump = await fs.stat(path.join(scratch, "database.dump")).catch(() => undefined);
        // The dump's last write, in this clock: mtime is wall-clock time.
        if (dump) dumpEnd = performance.now() - (Date.now() - dump.mtimeMs);
        if (!(await fs.stat(scratch).catch(() => undefined))) gone = performance.now();
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const watching = poll();
  try {
    await request();
  } finally {
    done = true;
    await watching;
  }
  const end = performance.now();
  // Removed in the last 50 ms before the answer: not seen gone by the poll.
  if (scratch && Number.isNaN(gone)) gone = end;
  return { before: seen - t0, copyRecovery: ready - seen, dump: dumpEnd - ready, restore: gone - dumpEnd, answer: end - gone };
}
