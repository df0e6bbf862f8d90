/**
 * The password probe of server-guard.ts: logs in over the admin URL's host and port as a
 * throw-away role with a wrong password, as a tenant would. A server that lets it in does not
 * check passwords. The role expires in minutes and is dropped right after (a crash leaves only an
 * expired role, dropped at the next probe).
 */
import { randomBytes } from "crypto";
import { Client } from "pg";
import { scramVerifier, VERIFIER_PATTERN } from "./credentials";
import type { ProbeOutcome } from "./server-guard";

type Queryable = { query(sql: string): Promise<unknown> };

export async function probeWrongPassword(adminUrl: string, admin: Queryable): Promise<ProbeOutcome> {
  const role = `ci_probe_${randomBytes(6).toString("hex")}`;
  await admin.query(createProbeRoleSql(role, await scramVerifier(randomBytes(24).toString("hex"))));
  try {
    const url = new URL(adminUrl);
    url.username = role;
    url.password = `wrong-${randomBytes(12).toString("hex")}`;
    const client = new Client({ connectionString: url.toString(), connectionTimeoutMillis: 10_000 });
    client.on("error", () => undefined);
    try {
      await client.connect();
      return { connected: true };
    } catch (err) {
      const { code, message } = err as { code?: unknown; message?: unknown };
      // No SQLSTATE: the probe never got an answer (network), which proves nothing either way.
      if (typeof code !== "string" || !/^[0-9A-Z]{5}$/.test(code)) throw err;
      return { connected: false, code, message: String(message) };
    } finally {
      await client.end().catch(() => undefined);
    }
  } finally {
    await admin.query(dropProbeRoleSql(role)).catch(() => undefined);
  }
}

const PROBE_ROLE = /^ci_probe_[0-9a-f]{12}$/;

/**
 * A throw-away LOGIN role for the password probe (server-guard.ts), expiring in minutes; expired
 * ones a crash left behind are dropped first.
 */
export function createProbeRoleSql(role: string, verifier: string, validUntil: Date = new Date(Date.now() + 10 * 60_000)): string {
  if (!PROBE_ROLE.test(role)) throw new Error(`Invalid probe role ${JSON.stringify(role)}`);
  if (!VERIFIER_PATTERN.test(verifier)) throw new Error("Refusing a password that is not a SCRAM verifier");
  return `DO $probe$
    DECLARE r text;
    BEGIN
      FOR r IN SELECT rolname FROM pg_roles WHERE rolname ~ '^ci_probe_[0-9a-f]{12}$' AND rolvaliduntil < pg_catalog.now() LOOP
        BEGIN EXECUTE pg_catalog.format('DROP ROLE %I', r); EXCEPTION WHEN others THEN NULL; END;
      END LOOP;
    END
    $probe$;
    CREATE ROLE "${role}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT CONNECTION LIMIT 1
      PASSWORD '${verifier}' VALID UNTIL '${validUntil.toISOString()}'`; // a checked verifier and a generated date: no quote can occur
}

export function dropProbeRoleSql(role: string): string {
  if (!PROBE_ROLE.test(role)) throw new Error(`Invalid probe role ${JSON.stringify(role)}`);
  return `DROP ROLE IF EXISTS "${role}"`;
}
