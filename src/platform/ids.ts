const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A UUID in its hyphenated form: what may be handed to a `uuid` column without a database error. */
export const isUuid = (value: string): boolean => UUID.test(value)
