/**
 * inference.files: the Batch API's files (uploads with purpose "batch", and the outputs of
 * batches, "batch_output"), content stored in the row. Every read is the account's own: another
 * account's id reads as absent.
 */
import type { Pool, PoolClient } from "pg";

export type FileRow = {
  id: string;
  client_id: string;
  purpose: "batch" | "batch_output";
  filename: string;
  bytes: string;
  line_count: number;
  endpoint: string | null;
  created_at: Date;
};

export type NewFile = Omit<FileRow, "bytes" | "created_at"> & { content: Buffer };

const COLUMNS = "id, client_id, purpose, filename, bytes, line_count, endpoint, created_at";

/** OpenAI's cursor pages: `after` an id of the list, newest first (or oldest first with order "asc"). */
export type Page = { after?: string; limit: number; order: "asc" | "desc" };

/** A keyset page of (created_at, id) after the row `after` names (that row's own account only). */
export function pageClause(table: string, page: Page, clientParam: string, afterParam: string): string {
  const cmp = page.order === "asc" ? ">" : "<";
  const dir = page.order === "asc" ? "ASC" : "DESC";
  const after = `(SELECT created_at, id FROM ${table} WHERE id = ${afterParam}::text AND client_id = ${clientParam})`;
  return `AND (${afterParam}::text IS NULL OR (created_at, id) ${cmp} ${after}) ORDER BY created_at ${dir}, id ${dir}`;
}

export class FilesRepository {
  constructor(private readonly db: Pool) {}

  async insert(file: NewFile, client: Pool | PoolClient = this.db): Promise<FileRow> {
    const { rows } = await client.query<FileRow>(
      `INSERT INTO inference.files (id, client_id, purpose, filename, bytes, line_count, endpoint, content)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${COLUMNS}`,
      [file.id, file.client_id, file.purpose, file.filename, file.content.length, file.line_count, file.endpoint, file.content],
    );
    return rows[0];
  }

  async get(clientId: string, id: string): Promise<FileRow | undefined> {
    const { rows } = await this.db.query<FileRow>(`SELECT ${COLUMNS} FROM inference.files WHERE id = $1 AND client_id = $2`, [id, clientId]);
    return rows[0];
  }

  async content(clientId: string, id: string): Promise<Buffer | undefined> {
    const { rows } = await this.db.query<{ content: Buffer }>("SELECT content FROM inference.files WHERE id = $1 AND client_id = $2", [id, clientId]);
    return rows[0]?.content;
  }

  async delete(clientId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.db.query("DELETE FROM inference.files WHERE id = $1 AND client_id = $2", [id, clientId]);
    return (rowCount ?? 0) > 0;
  }

  /** Each account's files' bytes (accounts without files: absent). */
  async accountBytes(clientIds: readonly string[]): Promise<Map<string, number>> {
    const { rows } = await this.db.query<{ client_id: string; bytes: string }>(
      "SELECT client_id, sum(bytes)::bigint AS bytes FROM inference.files WHERE client_id = ANY($1::uuid[]) GROUP BY client_id",
      [clientIds],
    );
    return new Map(rows.map((r) => [r.client_id, Number(r.bytes)]));
  }

  /** One page, and one row more than `limit` when there are more (`has_more`). */
  async list(clientId: string, page: Page, purpose?: string): Promise<FileRow[]> {
    const { rows } = await this.db.query<FileRow>(
      `SELECT ${COLUMNS} FROM inference.files WHERE client_id = $1 AND ($3::text IS NULL OR purpose = $3)
       ${pageClause("inference.files", page, "$1", "$2")} LIMIT $4`,
      [clientId, page.after ?? null, purpose ?? null, page.limit + 1],
    );
    return rows;
  }
}
