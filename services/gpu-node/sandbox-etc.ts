/**
 * A sandbox's /etc, made once per node process: copies of the host's safe entries (SAFE_ETC) that
 * every user may read, and the node's minimal passwd and group, in one folder (0755) that each
 * sandbox binds read-only as its /etc. One mount instead of one per entry (eighteen): bubblewrap's
 * mounts serialize on the kernel's mount lock, so with eight sandboxes starting at once every bind
 * slowed every launch (8 in parallel: 6.8–7.3 ms of the machine per launch with the eighteen binds,
 * 4.5 ms with the one folder; latency 45 → 27 ms).
 *
 * The copies are the host's /etc as the node found it when it first ran a job: a change there (new
 * CA certificates, a new ld.so.cache) reaches jobs when the node restarts. What only some users may
 * read (/etc/ssl/private) is not copied: the job's user could not read it through a bind either.
 */
import { promises as fs, rmSync } from "fs";
import os from "os";
import path from "path";
import { identityFiles, SAFE_ETC } from "./sandbox";

const folders = new Map<string, Promise<string>>();

/** The prepared /etc for jobs of `uid`/`gid` (made on first use, removed when the process exits). */
export function sandboxEtc(uid: number, gid: number, source = "/etc"): Promise<string> {
  const key = `${uid}:${gid}:${source}`;
  let folder = folders.get(key);
  if (!folder) {
    folder = makeEtc(uid, gid, source);
    // A failed copy is tried again by the next job.
    folder.catch(() => folders.delete(key));
    folders.set(key, folder);
  }
  return folder;
}

async function makeEtc(uid: number, gid: number, source: string): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "ci-etc-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  await fs.chmod(dir, 0o755);
  for (const entry of SAFE_ETC) await copyReadable(path.join(source, entry), path.join(dir, entry));
  const identity = identityFiles(uid, gid);
  await fs.writeFile(path.join(dir, "passwd"), identity.passwd, { mode: 0o644 });
  await fs.writeFile(path.join(dir, "group"), identity.group, { mode: 0o644 });
  return dir;
}

/** Copies `from` to `to` as far as every user may read it: symlinks as they are, folders (0755) and files (0644); nothing else. */
async function copyReadable(from: string, to: string): Promise<void> {
  const stat = await fs.lstat(from).catch(() => null);
  if (!stat) return;
  if (stat.isSymbolicLink()) return fs.symlink(await fs.readlink(from), to);
  if (stat.isDirectory()) {
    if ((stat.mode & 0o005) !== 0o005) return;
    await fs.mkdir(to);
    await fs.chmod(to, 0o755);
    for (const name of await fs.readdir(from)) await copyReadable(path.join(from, name), path.join(to, name));
    return;
  }
  if (stat.isFile() && stat.mode & 0o004) {
    await fs.copyFile(from, to);
    await fs.chmod(to, 0o644);
  }
}
