/**
 * Credentials: the rotate-password route, and the connection string every answer with a password
 * carries (with the sslmode DBAAS_SSLMODE settles, README "TLS"). Handlers hand over to
 * credentials.ts and tenant-server.ts.
 */
import type { Context, ServiceActionsSchema, ServiceMethods } from "moleculer";
import type { CallerMeta } from "../../lib/identity";
import { PasswordRotated } from "./contract";
import { generatePassword, scramVerifier } from "./credentials";
import type { DatabaseRow } from "./databases.repository";
import type { DbaasThis } from "./dbaas.service";
import { unavailable } from "./faults";

export const credentialActions: ServiceActionsSchema = {
  rotatePassword: {
    rest: "POST /:id/rotate-password",
    auth: "required",
    openapi: {
      tag: "databases",
      summary: "Replace the database's password",
      description: "The new password is shown in this response only; the old one stops working at once and the role's open sessions are ended.",
      status: 200,
      response: PasswordRotated,
      errors: ["NOT_FOUND", "INVALID_STATE"],
    },
    params: { $$strict: "remove", id: { type: "string" } },
    async handler(this: DbaasThis, ctx: Context<{ id: string }, CallerMeta>): Promise<PasswordRotated> {
      const row = await this.findReady(ctx);
      if (!(await this.verifyServer())) throw unavailable(); // also settles the connection string's sslmode
      const password = generatePassword();
      await this.tenant.rotatePassword({ databaseName: row.database_name, username: row.username }, await scramVerifier(password));
      return { id: row.id, username: row.username, password, connectionString: this.connectionString(row, password) };
    },
  },
};

export const credentialMethods: ServiceMethods = {
  connectionString(this: DbaasThis, row: DatabaseRow, password: string): string {
    const { publicHost, publicPort } = this.config;
    return `postgresql://${row.username}:${password}@${publicHost}:${publicPort}/${row.database_name}${this.sslSuffix ?? ""}`;
  },

  /** Settles the sslmode of connection strings; with `auto`, `require` when the server has TLS on. */
  async resolveSslMode(this: DbaasThis): Promise<void> {
    const mode = this.config.sslMode;
    if (mode !== "auto") this.sslSuffix = mode === "off" ? "" : `?sslmode=${mode}`;
    else if (this.sslSuffix === undefined) this.sslSuffix = (await this.tenant.hasTls()) ? "?sslmode=require" : "";
  },
};
