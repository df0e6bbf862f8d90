/**
 * A host process for bench:scheduler: NODES_COUNT gpu-node brokers, each its own Moleculer node
 * (own nodeID, own NATS connections), each announcing GPU_SIMULATE's cards. They run the real
 * gpu-node service (run/cancel/logs actions, heartbeats, job events over JetStream, a log file per
 * job) with a no-op executor: a job "runs" by ending at once with exit code 0 (`sleep <s>`: after
 * that many seconds, or when stopped), so the benchmark
 * measures the scheduler and the protocol, not process creation. BENCH_EXECUTOR=process keeps the
 * real process executor instead. On the authenticated bus (BENCH_NODE_PASSWORDS: JSON user →
 * password, from bench/scheduler.bench.ts) each broker connects as its own gpu-node user.
 */
import { ServiceBroker, ServiceSchema } from "moleculer";
import { newBroker } from "../moleculer.config";
import GpuNodeService from "../services/gpu-node/gpu-node.service";
import { JobExecutor, JobLimits, JobOps, JobSpec, RunningJob } from "../services/gpu-node/job";

/** A job "runs" for the seconds of a `sleep <s>` command (the fairness and deep-queue modes), else ends at once. */
const noopOps = (command: string): JobOps => {
  const seconds = Number(/^sleep (\d+(?:\.\d+)?)$/.exec(command)?.[1] ?? 0);
  let stop: (code: number) => void = () => undefined;
  const ended = seconds ? new Promise<number>((resolve) => ((stop = resolve), setTimeout(() => resolve(0), seconds * 1000))) : Promise.resolve(0);
  return {
    async launch(output) {
      output.append(Buffer.from("ok\n"));
    },
    exited: () => ended,
    kill: async () => stop(143),
    cleanup: async () => undefined,
    detach: () => undefined,
  };
};

class NoopExecutor implements JobExecutor {
  readonly kind = "process" as const;
  readonly jobsOutliveNode = false;
  constructor(private readonly limits: () => JobLimits) {}
  run(spec: JobSpec): RunningJob {
    return new RunningJob(spec.jobId, spec.card.uuid, noopOps(spec.command), this.limits());
  }
  async adopt(): Promise<RunningJob[]> {
    return [];
  }
}

const real = GpuNodeService as unknown as ServiceSchema; // its `this` type is the node's own
const schema: ServiceSchema =
  process.env.BENCH_EXECUTOR === "process"
    ? real
    : {
        mixins: [real],
        name: "gpu-node",
        methods: {
          async chooseExecutor(this: { jobLimits(): JobLimits }) {
            return new NoopExecutor(() => this.jobLimits());
          },
        },
      };

async function main() {
  const prefix = process.env.NODES_PREFIX || "bench-node";
  const from = Number(process.env.NODES_FROM || 0);
  const count = Number(process.env.NODES_COUNT || 1);
  const passwords = process.env.BENCH_NODE_PASSWORDS ? (JSON.parse(process.env.BENCH_NODE_PASSWORDS) as Record<string, string>) : undefined;
  const brokers: ServiceBroker[] = [];
  for (let i = from; i < from + count; i++) {
    const name = `${prefix}-${String(i).padStart(3, "0")}`;
    // Each broker has its own credential and node name: its own environment record.
    const broker = passwords
      ? newBroker(["gpu-node"], {}, { ...process.env, NATS_USER: `gpu-node.${name}`, NATS_PASSWORD: passwords[`gpu-node.${name}`], GPU_NODE_NAME: name })
      : newBroker(undefined, { nodeID: name });
    broker.createService(schema);
    brokers.push(broker);
  }
  // A few at a time: a hundred brokers connecting at once would starve the machine's two cores.
  for (let i = 0; i < brokers.length; i += 10) await Promise.all(brokers.slice(i, i + 10).map((b) => b.start()));
  process.stdout.write(`ready ${count}\n`);
  const stop = async () => {
    await Promise.all(brokers.map((b) => b.stop().catch(() => undefined)));
    process.exit(0);
  };
  process.once("SIGTERM", () => void stop());
  process.once("SIGINT", () => void stop());
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
