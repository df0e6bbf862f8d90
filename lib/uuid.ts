/**
 * The one UUID rule: ids the platform generates (randomUUID) and accepts back from clients, tokens
 * and nodes (account ids, job and database ids). Case-insensitive, no braces, nothing around it.
 */
/** As a string for schemas (JSON Schema patterns are case-sensitive: both cases are spelled out). */
export const UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
const UUID = new RegExp(UUID_PATTERN);

export const isUuid = (value: string): boolean => UUID.test(value);
