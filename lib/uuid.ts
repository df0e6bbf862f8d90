/**
 * The one UUID rule: ids the platform generates (randomUUID) and accepts back from clients, tokens
 * and nodes (account ids, job and database ids). Case-insensitive, no braces, nothing around it.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (value: string): boolean => UUID.test(value);
