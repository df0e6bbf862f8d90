/**
 * The Batch API's files (/v1/files, API-DECISIONS "Inference: the Batch API"): upload, list, get,
 * content, delete, each the account's own. Files count towards the account's storage quota
 * (`storageMb`, with its databases and snapshots: the usage service reads `inference.fileStorage`):
 * an upload that does not fit is 403 QUOTA_EXCEEDED and stores nothing; a delete frees its bytes.
 */
import { randomBytes } from "crypto";
import { Readable } from "stream";
import type { Context } from "moleculer";
import { apiError, notFound, validationFailed } from "../../../lib/errors";
import type { CallerMeta } from "../../../lib/identity";
import type { QuotaGate } from "../../../lib/quota-gate";
import { checkBatchInput, MAX_BYTES } from "./batch-input";
import { parseIdParams, parseListParams } from "./batch-params";
import { cursorPage, fileObject } from "./batch-views";
import type { FilesRepository } from "./files.repository";
import { readUpload } from "./multipart";

type FilesHost = { files: FilesRepository; gate: QuotaGate };
type Meta = CallerMeta & { $multipartType?: string; $responseType?: string };

const MIB = 1024 * 1024;
const newId = () => randomBytes(12).toString("hex");
const clientOf = (ctx: Context<unknown, Meta>) => ctx.meta.caller!.clientId;

/** 403 QUOTA_EXCEEDED (resource storageMb) when the account's storage is used up, or `bytes` more would not fit. */
async function checkStorage(gate: QuotaGate, clientId: string, bytes: number): Promise<void> {
  const standing = await gate.check(clientId, ["storageMb"]);
  const quota = standing?.quotas.find((q) => q.resource === "storageMb");
  if (!quota || quota.limit === null || quota.used + bytes / MIB <= quota.limit) return;
  const { limit, used } = quota;
  throw apiError("QUOTA_EXCEEDED", `The account's storage quota is ${limit} MB: ${used} MB are taken, this file's ${(bytes / MIB).toFixed(3)} MB do not fit`, {
    resource: "storageMb",
    limit,
    used,
  });
}

/** The /v1/files actions, on the service's /v1 action settings (`base`), and the internal one usage reads. */
export function fileActions<Base extends object>(base: Base) {
  return {
    /** POST /v1/files (multipart: the gateway streams the body here). */
    v1FilesCreate: {
      ...base,
      async handler(this: FilesHost, ctx: Context<Readable, Meta>) {
        const clientId = clientOf(ctx);
        // A full account is refused before its upload is read.
        await checkStorage(this.gate, clientId, 0);
        const upload = await readUpload(ctx.params, ctx.meta.$multipartType, MAX_BYTES);
        if (upload.purpose !== "batch") throw validationFailed([{ field: "purpose", message: 'must be "batch"' }]);
        const { lines, endpoint } = checkBatchInput(upload.content);
        await checkStorage(this.gate, clientId, upload.content.length);
        const file = await this.files.insert({
          id: `file-${newId()}`,
          client_id: clientId,
          purpose: "batch",
          filename: upload.filename,
          line_count: lines.length,
          endpoint,
          content: upload.content,
        });
        // The next upload asks usage again: its standing counts this file.
        this.gate.forget(clientId);
        return fileObject(file);
      },
    },
    v1FilesList: {
      ...base,
      async handler(this: FilesHost, ctx: Context<unknown, Meta>) {
        const page = parseListParams(ctx.params, { max: 10_000, fallback: 10_000, files: true });
        return cursorPage(await this.files.list(clientOf(ctx), page, page.purpose), page.limit, fileObject);
      },
    },
    v1FilesGet: {
      ...base,
      async handler(this: FilesHost, ctx: Context<unknown, Meta>) {
        const file = await this.files.get(clientOf(ctx), parseIdParams(ctx.params));
        if (!file) throw notFound("File");
        return fileObject(file);
      },
    },
    v1FilesContent: {
      ...base,
      async handler(this: FilesHost, ctx: Context<unknown, Meta>) {
        const content = await this.files.content(clientOf(ctx), parseIdParams(ctx.params));
        if (!content) throw notFound("File");
        ctx.meta.$responseType = "application/jsonl";
        // A Readable crosses the bus in chunks (a file is up to 100 MiB).
        return Readable.from([content]);
      },
    },
    v1FilesDelete: {
      ...base,
      async handler(this: FilesHost, ctx: Context<unknown, Meta>) {
        const id = parseIdParams(ctx.params);
        if (!(await this.files.delete(clientOf(ctx), id))) throw notFound("File");
        this.gate.forget(clientOf(ctx));
        return { id, object: "file", deleted: true };
      },
    },
    /** Internal: each account's files' bytes (uploads and batch outputs), which count in its storage (usage reads them; none: absent). */
    fileStorage: {
      visibility: "public" as const,
      callers: ["usage"] as const,
      params: { clientIds: { type: "array", items: "uuid", min: 1, max: 1000 } },
      async handler(this: FilesHost, ctx: Context<{ clientIds: string[] }>): Promise<Record<string, { bytes: number; storageMb: number }>> {
        const bytes = await this.files.accountBytes(ctx.params.clientIds);
        return Object.fromEntries([...bytes].map(([id, b]) => [id, { bytes: b, storageMb: b / MIB }]));
      },
    },
  };
}
