/**
 * Credentials: the rotate-password route. Its handler hands over to rotatePassword, which works
 * with credentials.ts and tenant-server.ts; the connection string every answer with a password
 * carries is lookups.ts connectionString.
 */
import type { Context, ServiceActionsSchema } from "moleculer";
import type { CallerMeta } from "../../lib/identity";
import type { DbaasApp, WithApp } from "./app";
import { PasswordRotated } from "./contract";
import { generatePassword, scramVerifier } from "./credentials";
import { connectionStrings, findReady } from "./lookups";
import { unavailable } from "./faults";

export const credentialActions: ServiceActionsSchema = {
  rotatePassword: {
    rest: "POST /:id/rotate-password",
    auth: "required",
    scope: "databases:write",
    openapi: {
      tag: "databases",
      summary: "Replace the database's password",
      description: "The new password is shown in this response only; the old one stops working at once and the role's open sessions are ended.",
      status: 200,
      response: PasswordRotated,
      errors: ["NOT_FOUND", "INVALID_STATE"],
    },
    params: { $$strict: "remove", id: { type: "string" } },
    async handler(this: WithApp, ctx: Context<{ id: string }, CallerMeta>): Promise<PasswordRotated> {
      return rotatePassword(this.app, ctx.params.id, ctx.meta.caller!.clientId);
    },
  },
};

/** A new password for the caller's ready database; the old one opens nothing from here on. */
export async function rotatePassword(app: DbaasApp, id: string, clientId: string): Promise<PasswordRotated> {
  const row = await findReady(app, id, clientId);
  if (!(await app.verifyServer())) throw unavailable(); // also settles the connection string's sslmode
  const password = generatePassword();
  await app.tenant.rotatePassword({ databaseName: row.database_name, username: row.username }, await scramVerifier(password));
  return { id: row.id, username: row.username, password, ...connectionStrings(app, row, password) };
}
