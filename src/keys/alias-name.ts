/**
 * Key aliases (docs/keys.md "Key aliases"): `alias/<name>`, name 1 to 250 characters of
 * [A-Za-z0-9/_-], case-sensitive, unique in the tenant. A key reference, wherever the API takes a
 * key id, is either the key's id (a UUID, either case) or one of its aliases.
 */

const ALIAS_PREFIX = 'alias/'
/** Aliases under this prefix are the service's own: a tenant cannot create them. */
export const RESERVED_ALIAS_PREFIX = 'alias/kms/'
export const MAX_ALIAS_NAME_CHARS = 250
export const MAX_ALIAS_CHARS = ALIAS_PREFIX.length + MAX_ALIAS_NAME_CHARS
/** Aliases one key may carry (AWS KMS's quota is alike): a key view lists them all. */
export const MAX_ALIASES_PER_KEY = 50

const ALIAS_BODY = `alias/[A-Za-z0-9/_-]{1,${MAX_ALIAS_NAME_CHARS}}`
const UUID_BODY = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}'

/** An alias, whole. No `.`, `%`, `\` or space: nothing a path could read as another segment. */
export const ALIAS_PATTERN = `^${ALIAS_BODY}$`
/** A key id or an alias. */
export const KEY_REF_PATTERN = `^(?:${UUID_BODY}|${ALIAS_BODY})$`

const ALIAS_RE = new RegExp(ALIAS_PATTERN)
const UUID_RE = new RegExp(`^${UUID_BODY}$`)

export const isAlias = (ref: string): boolean => ALIAS_RE.test(ref)

/** A reference that starts like an alias (validated or not): it is never a key id. */
export const isAliasRef = (ref: string | null | undefined): boolean => ref?.startsWith(ALIAS_PREFIX) === true

export const isReservedAlias = (alias: string): boolean => alias.startsWith(RESERVED_ALIAS_PREFIX)

/**
 * The key id a reference is when it is an id (in the canonical lower case the database and
 * envelopes use); undefined for an alias or anything else, which a key id never equals.
 */
export function keyIdOfRef(ref: string): string | undefined {
  return UUID_RE.test(ref) ? ref.toLowerCase() : undefined
}
