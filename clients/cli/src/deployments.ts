/**
 * deployments (alias deploy) create|ls|get|rm|logs: model deployments (docs/deployments.md). A
 * deployment serves a model server's command on the platform's GPUs under its own name; `logs`
 * prints the newest replica's output. A deployment is named by its id or its name; `--wait` shows
 * the status live while a replica starts (deployment-wait.ts).
 */
import type { Argv } from "yargs";
import type { Deployment, DeploymentRequest } from "../../sdk/src";
import { Context, Run, UsageError } from "./context";
import { resolveDeploymentId, waitForDeployment } from "./deployment-wait";
import { printJson, printRecord, printTable, statusText } from "./output";

const idArg = <T>(c: Argv<T>) => c.positional("id", { type: "string", demandOption: true, describe: "the deployment's id or name" });
const waitOption = [
  "wait",
  { type: "boolean", describe: "show the status live until a replica is ready (or it fails, or is idle with none to start)" },
] as const;

function show(ctx: Context, d: Deployment): void {
  if (ctx.json) return printJson(ctx, d);
  const { replicas, ...rest } = d;
  printRecord(ctx, { ...rest, replicas: `${replicas.ready} ready, ${replicas.starting} starting, ${replicas.desired} desired` });
}

type CreateArgs = {
  name: string;
  command: string;
  port: number;
  image?: string;
  gpuType?: string;
  gpuCount?: number;
  env?: string[];
  readinessPath?: string;
  minReplicas?: number;
  maxReplicas?: number;
};

/** The request of `deployments create`; a malformed --env is a usage mistake, nothing is sent. */
export function deploymentRequest(args: CreateArgs): DeploymentRequest {
  const body: DeploymentRequest = { name: args.name, command: args.command, port: args.port };
  if (args.image) body.containerImage = args.image;
  if (args.gpuType) body.gpuType = args.gpuType;
  if (args.gpuCount !== undefined) body.gpuCount = args.gpuCount;
  if (args.readinessPath) body.readinessPath = args.readinessPath;
  if (args.minReplicas !== undefined) body.minReplicas = args.minReplicas;
  if (args.maxReplicas !== undefined) body.maxReplicas = args.maxReplicas;
  if (args.env?.length) {
    body.env = {};
    for (const entry of args.env) {
      const at = entry.indexOf("=");
      if (at < 1) throw new UsageError(`--env takes NAME=value, not "${entry}"`);
      body.env[entry.slice(0, at)] = entry.slice(at + 1);
    }
  }
  return body;
}

export function deploymentCommands(y: Argv, run: Run): Argv {
  return y.command(["deployments", "deploy"], "model deployments: your model server on the platform's GPUs, called by its name", (d) =>
    d
      .command(
        "create",
        "deploy a model server: --name N --command 'vllm serve … --port 8000' --port 8000",
        (c) =>
          c
            .option("name", { type: "string", describe: "the model name requests use" })
            .option("command", { type: "string", describe: "the shell command that starts the server" })
            .option("port", { type: "number", describe: "the port it listens on inside its job" })
            .option("image", { type: "string", describe: "container image (else the node's default)" })
            .option("gpu-type", { type: "string" })
            .option("gpu-count", { type: "number" })
            .option("env", { type: "string", array: true, describe: "NAME=value (repeatable)" })
            .option("readiness-path", { type: "string", describe: 'ready once GET on it answers 2xx (default "/v1/models")' })
            .option("min-replicas", { type: "number" })
            .option("max-replicas", { type: "number" })
            .option(...waitOption)
            .demandOption(["name", "command", "port"]),
        run(async (ctx, args: CreateArgs & { wait?: boolean }) => {
          const made = await ctx.client().createDeployment(deploymentRequest(args));
          show(ctx, args.wait ? await waitForDeployment(ctx, made.id) : made);
        }),
      )
      .command(
        "ls",
        "your deployments",
        (c) => c,
        run(async (ctx) => {
          const { deployments } = await ctx.client().listDeployments();
          const rows = deployments.map((x) => [x.id, x.name, statusText(ctx.stdout, x.status), `${x.replicas.ready}/${x.replicas.desired}`, x.createdAt]);
          printTable(ctx, ["id", "name", "status", "ready/desired", "created"], rows, deployments);
        }),
      )
      .command(
        "get <id>",
        "one deployment, with why it is in its status",
        (c) => idArg(c).option(...waitOption),
        run(async (ctx, args) => {
          const id = await resolveDeploymentId(ctx, args.id);
          show(ctx, args.wait ? await waitForDeployment(ctx, id) : await ctx.client().getDeployment(id));
        }),
      )
      .command(
        "rm <id>",
        "delete a deployment: its replicas stop",
        idArg,
        run(async (ctx, args) => {
          const result = await ctx.client().deleteDeployment(await resolveDeploymentId(ctx, args.id));
          if (ctx.json) printJson(ctx, result);
          else ctx.stderr.write(`${result.message}\n`);
        }),
      )
      .command(
        "logs <id>",
        "the output of the deployment's newest replica",
        idArg,
        run(async (ctx, args) => {
          const { jobs } = await ctx.client().deploymentReplicas(await resolveDeploymentId(ctx, args.id));
          if (!jobs.length) throw new UsageError(`Deployment ${args.id} has no replica yet`);
          ctx.stdout.write(await ctx.client().jobLogs(jobs[0].id));
        }),
      )
      .demandCommand(1),
  );
}
