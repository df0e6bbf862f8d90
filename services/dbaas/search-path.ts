/**
 * Every session dbaas opens on the tenant server resolves functions, operators and types in
 * pg_catalog only (CVE-2018-1058): a tenant can create objects in its database's schemas, and an
 * overload there with closer argument types would otherwise win over pg_catalog's and run as
 * dbaas's superuser. Set in the startup packet, so it holds before the first statement and
 * whatever the database or role settings say; pg_temp last, so no temporary object shadows either.
 */
export const PINNED_OPTIONS = "-c search_path=pg_catalog,pg_temp";

/** After the URL's own `options` (if any), so the pin has the last word. */
function withPin(own: string | null): string {
  return own ? `${own} ${PINNED_OPTIONS}` : PINNED_OPTIONS;
}

/** node-postgres settings for `url` (a connection string's `options` would replace a separate one: merged here). */
export function pinnedConnection(url: string): { connectionString: string; options: string } {
  const u = new URL(url);
  const own = u.searchParams.get("options");
  u.searchParams.delete("options");
  return { connectionString: u.toString(), options: withPin(own) };
}

/** The same for libpq's tools (pg_dump, pg_restore): PGOPTIONS. */
export const pinnedPgOptions = (url: string): string => withPin(new URL(url).searchParams.get("options"));
