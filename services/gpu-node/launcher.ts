/**
 * A resident launcher for job processes. Forking the node (a ~110 MiB process) for every job
 * blocked its event loop for milliseconds per launch (issue 18); instead one small helper process,
 * started once, forks the jobs. It reads one JSON request per line on its stdin and answers on its
 * stdout; a job's stdout is a Unix socket the helper connected to this process (named by a one-time
 * token), so the output still streams straight to the node with its back-pressure. A job inherits
 * nothing of the helper: its stdin is /dev/null, its stdout and stderr that socket, every other
 * descriptor is close-on-exec (the helper closes any it inherited that is not), and the helper runs
 * with an empty environment.
 */
import { ChildProcess, spawn } from "child_process";
import { randomBytes } from "crypto";
import { mkdtempSync } from "fs";
import net from "net";
import os from "os";
import path from "path";
import readline from "readline";

/**
 * What to run: the program, its arguments and the whole environment, cwd and user of the process.
 * `joinStderr`: its stderr is its stdout (one stream, in the order written). `cgroup`: it is born in
 * the cgroup whose `cgroup.procs` files `enter` names (one per hierarchy): the helper moves itself
 * there, forks it and moves back to `home` (its own cgroups, the same hierarchies in the same order).
 */
export type LaunchRequest = {
  file: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  uid?: number;
  gid?: number;
  joinStderr?: boolean;
  cgroup?: { enter: string[]; home: string[] };
};
export type LaunchExit = { code: number | null; signal: NodeJS.Signals | null };
/** A started job: its pid (the leader of its own process group), its stdout, and how it ended. */
export type Launched = { pid: number; output: net.Socket; exit: Promise<LaunchExit> };

/** The helper (plain JavaScript for `node -e`, so it runs the same from sources and from dist/). */
const HELPER_SOURCE = `"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const net = require("net");
// A descriptor the node inherited without close-on-exec would pass into every job: close it here.
for (const fd of fs.readdirSync("/proc/self/fd").map(Number).filter((fd) => fd > 2)) {
  let info;
  try { info = /flags:\\s*(\\d+)/.exec(fs.readFileSync("/proc/self/fdinfo/" + fd, "utf8")); } catch { continue; }
  if (info && (parseInt(info[1], 8) & 0o2000000) === 0) try { fs.closeSync(fd); } catch {}
}
const reply = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
// Moves this process into the cgroups whose cgroup.procs files are given (a child forked meanwhile is
// born there); where a cgroup v1 tasks file is given, only the thread that forks ("0": the calling
// one): the kernel then skips its global lock of whole-process moves, whose first taking after a
// pause waits for an RCU grace period (3 to 10 ms a launch on an idle node, 0.25 ms this way).
const moveTo = (files) => { for (const file of files) fs.writeFileSync(file, file.endsWith("/tasks") ? "0" : String(process.pid)); };
// Never stay in a job's cgroup (its end kills every process in it): if this process cannot leave, it ends.
const homeOrExit = (home) => {
  try {
    moveTo(home);
  } catch (e) {
    process.stderr.write("job launcher: cannot leave a job's cgroup (" + e.message + "): stopping\\n");
    process.exit(70);
  }
};
// Forks the job, in its cgroup when it has one (synchronously: nothing else runs while this process is in it).
const fork = (r, out) => {
  const options = { cwd: r.cwd, env: r.env, uid: r.uid, gid: r.gid, detached: true, stdio: ["ignore", out, r.joinStderr ? out : "ignore"] };
  if (!r.cgroup) return spawn(r.file, r.args, options);
  try {
    moveTo(r.cgroup.enter);
  } catch (e) {
    homeOrExit(r.cgroup.home);
    throw new Error("the job's cgroup could not be entered: " + e.message);
  }
  try {
    return spawn(r.file, r.args, options);
  } finally {
    homeOrExit(r.cgroup.home);
  }
};
require("readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const r = JSON.parse(line);
  const out = net.connect(r.socket);
  out.once("error", (e) => reply({ id: r.id, error: e.message }));
  out.once("connect", () => out.write(r.token + "\\n", () => {
    let child;
    try {
      child = fork(r, out);
    } catch (e) {
      out.destroy();
      return reply({ id: r.id, error: e.message });
    }
    child.once("error", (e) => (out.destroy(), reply({ id: r.id, error: e.message })));
    child.once("spawn", () => (out.destroy(), reply({ id: r.id, pid: child.pid })));
    child.once("exit", (code, signal) => reply({ id: r.id, code, signal }));
  }));
});
process.stdin.once("end", () => process.exit(0));`;

/** Bytes of a token line: 16 random bytes in hex and a newline. */
const TOKEN_LINE = 33;
/** A dying helper takes its sandboxed jobs with it (bwrap --die-with-parent): they end as if killed. */
const HELPER_LOST: LaunchExit = { code: null, signal: "SIGKILL" };

type Pending = { started: (pid: number) => void; failed: (err: Error) => void; ended: (exit: LaunchExit) => void };

export class Launcher {
  private helper?: ChildProcess;
  private server?: net.Server;
  private socketPath?: string;
  private nextId = 0;
  private readonly pending = new Map<number, Pending>();
  private readonly outputs = new Map<string, (socket: net.Socket) => void>();

  /** The helper's pid (started on the first launch), for tests and the bench. */
  get pid(): number | undefined {
    return this.helper?.pid;
  }

  async launch(request: LaunchRequest): Promise<Launched> {
    const helper = await this.start();
    const id = this.nextId++;
    const token = randomBytes(16).toString("hex");
    const output = new Promise<net.Socket>((resolve) => this.outputs.set(token, resolve));
    let ended!: (exit: LaunchExit) => void;
    const exit = new Promise<LaunchExit>((resolve) => (ended = resolve));
    const pid = await new Promise<number>((started, failed) => {
      this.pending.set(id, { started, failed, ended });
      this.holdOpen();
      helper.stdin!.write(`${JSON.stringify({ ...request, id, token, socket: this.socketPath })}\n`);
    }).catch((err: Error) => {
      this.outputs.delete(token);
      throw err;
    });
    // The helper connected the socket before it forked: it is accepted here, if not already.
    return { pid, output: await output, exit };
  }

  /** The helper's pid, starting it if it is not running (a caller that needs its cgroups). */
  async helperPid(): Promise<number> {
    return (await this.start()).pid!;
  }

  /** Where jobs' output connects (for tests). */
  get socket(): string | undefined {
    return this.socketPath;
  }

  /** Stops the helper (jobs in a sandbox end with it) and the socket server. */
  close(): void {
    this.helper?.stdin?.end();
    this.server?.close();
    this.server = undefined;
  }

  private async start(): Promise<ChildProcess> {
    if (!this.server) {
      // A folder only this user can enter: the token is the second lock, not the first.
      this.socketPath = path.join(mkdtempSync(path.join(os.tmpdir(), "ci-launcher-")), "out.sock");
      const server = net.createServer((socket) => this.accept(socket));
      this.server = server;
      await new Promise<void>((resolve, reject) => server.once("error", reject).listen(this.socketPath, resolve));
      server.unref();
    }
    if (!this.helper) this.helper = this.spawnHelper();
    return this.helper;
  }

  private spawnHelper(): ChildProcess {
    // An empty environment: nothing of the node's (secrets included) reaches the helper or its jobs.
    const helper = spawn(process.execPath, ["--max-old-space-size=32", "-e", HELPER_SOURCE], { env: {}, stdio: ["pipe", "pipe", "inherit"] });
    readline.createInterface({ input: helper.stdout! }).on("line", (line) => this.answer(line));
    helper.once("exit", () => {
      if (this.helper === helper) this.helper = undefined;
      for (const job of this.pending.values()) {
        job.failed(new Error("the job launcher stopped"));
        job.ended(HELPER_LOST);
      }
      this.pending.clear();
    });
    helper.stdin!.on("error", () => undefined); // a write to a helper that just died: its exit answers
    helper.unref();
    (helper.stdin as net.Socket).unref();
    (helper.stdout as net.Socket).unref();
    return helper;
  }

  /** The process stays up while a launch or a job is pending (as it would for a child of its own), not for an idle helper. */
  private holdOpen(): void {
    const replies = this.helper?.stdout as net.Socket | undefined;
    if (this.pending.size) replies?.ref();
    else replies?.unref();
  }

  private answer(line: string): void {
    const msg = JSON.parse(line) as { id: number; pid?: number; error?: string; code?: number | null; signal?: NodeJS.Signals | null };
    const job = this.pending.get(msg.id);
    if (!job) return;
    if (msg.error !== undefined) {
      this.pending.delete(msg.id);
      job.failed(new Error(msg.error));
    } else if (msg.pid !== undefined) job.started(msg.pid);
    else {
      this.pending.delete(msg.id);
      job.ended({ code: msg.code ?? null, signal: msg.signal ?? null });
    }
    this.holdOpen();
  }

  /** A job's stdout arrives: its first line is the token naming the launch it belongs to. */
  private accept(socket: net.Socket): void {
    socket.on("error", () => socket.destroy());
    const readToken = () => {
      const head = socket.read(TOKEN_LINE) as Buffer | null;
      if (!head) return;
      socket.off("readable", readToken);
      const deliver = this.outputs.get(head.subarray(0, TOKEN_LINE - 1).toString());
      if (!deliver) return socket.destroy();
      this.outputs.delete(head.subarray(0, TOKEN_LINE - 1).toString());
      deliver(socket);
    };
    socket.on("readable", readToken);
  }
}

let shared: Launcher | undefined;

/** The node's one launcher (every process executor of the process shares it). */
export function sharedLauncher(): Launcher {
  return (shared ??= new Launcher());
}
