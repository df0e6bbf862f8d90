/**
 * POST /v1/files's body: multipart/form-data with a `file` part and a `purpose` field, in either
 * order (OpenAI's clients send the file first). The gateway streams the request body here
 * untouched; @fastify/busboy (the parser moleculer-web itself uses) reads it under limits, so a
 * body over the size or part limits stops being read at once.
 */
import type { Readable } from "stream";
import Busboy from "@fastify/busboy";
import { apiError, validationFailed } from "../../../lib/errors";

export type Upload = { purpose: string | undefined; filename: string; content: Buffer };

const MAX_FILENAME = 255;
/** Room for the part headers, boundaries and the small fields around the file. */
const BODY_SLACK = 64 * 1024;

export function readUpload(body: Readable, contentType: string | undefined, maxBytes: number): Promise<Upload> {
  if (!contentType || !/^multipart\/form-data\b/i.test(contentType)) {
    body.resume();
    return Promise.reject(apiError("UNSUPPORTED_MEDIA_TYPE", "Request body must be multipart/form-data (a file and its purpose)"));
  }
  return new Promise((resolve, reject) => {
    let purpose: string | undefined;
    let file: { filename: string; content: Buffer } | undefined;
    let failed = false;
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      body.unpipe();
      body.resume();
      reject(err);
    };
    let parser: ReturnType<typeof Busboy>;
    try {
      parser = Busboy({ headers: { "content-type": contentType }, limits: { files: 1, fields: 8, fileSize: maxBytes, fieldSize: 1024 } });
    } catch (err) {
      return fail(validationFailed([{ field: "file", message: (err as Error).message }]));
    }
    const pending: Array<Promise<void>> = [];
    parser.on("field", (name, value) => {
      if (name === "purpose") purpose = value;
    });
    parser.on("file", (name, stream, filename) => {
      if (name !== "file" || file) return void stream.resume();
      const chunks: Buffer[] = [];
      pending.push(
        new Promise((done) => {
          stream.on("data", (c: Buffer) => chunks.push(c));
          stream.on("limit", () => fail(apiError("PAYLOAD_TOO_LARGE", `The file is larger than ${maxBytes} bytes`)));
          stream.on("end", () => {
            file = { filename: (filename || "upload.jsonl").slice(0, MAX_FILENAME), content: Buffer.concat(chunks) };
            done();
          });
        }),
      );
    });
    parser.on("error", (err) => fail(validationFailed([{ field: "file", message: `Malformed multipart body: ${(err as Error).message}` }])));
    parser.on("finish", () => {
      void Promise.all(pending).then(() => {
        if (failed) return;
        if (!file) return fail(validationFailed([{ field: "file", message: "is required (a multipart part named file)" }]));
        resolve({ purpose, ...file });
      });
    });
    // The whole body too (extra parts are read to be skipped): the file, its part headers and the fields.
    let received = 0;
    body.on("data", (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes + BODY_SLACK) fail(apiError("PAYLOAD_TOO_LARGE", `The request body is larger than ${maxBytes + BODY_SLACK} bytes`));
    });
    body.on("error", fail);
    body.pipe(parser);
  });
}
