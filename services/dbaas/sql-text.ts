/**
 * What every SQL builder of dbaas shares (tenant-sql.ts, freeze-sql.ts): the one way a checked
 * text is inlined as a literal, pg_catalog's operators, the large-object creators a tenant may lose, and the
 * instance marker's check.
 */
export type TenantRef = { databaseName: string; username: string };

const MARKER_PATTERN = /^ci-platform:dbaas:[0-9a-f-]{36}$/;
// Large objects can be created by any role unless these are revoked; a read-only tenant must not.
export const LO_CREATORS = "pg_catalog.lo_creat(integer), pg_catalog.lo_create(oid), pg_catalog.lo_from_bytea(oid, bytea)";

export const literal = (text: string) => `'${text}'`; // only ever for texts that passed a pattern without quotes
// Operators in SQL run inside tenant databases name pg_catalog's, beside the pinned search_path (search-path.ts).
export const EQ = "OPERATOR(pg_catalog.=)";
export const NE = "OPERATOR(pg_catalog.<>)";

export function checkMarker(marker: string): string {
  if (!MARKER_PATTERN.test(marker)) throw new Error(`Invalid instance marker ${JSON.stringify(marker)}`);
  return marker;
}
