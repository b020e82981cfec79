/**
 * What an API key restricted to some keys and operations may do (issue 35: narrower API keys).
 * Scopes still apply first; a restriction only ever narrows them. Set when the API key is created
 * and never changed (docs/operations.md "API keys").
 */

/** The cryptographic operations a restriction can name: the audit action without `crypto.`. */
export const KEY_OPERATIONS = [
  'encrypt',
  'decrypt',
  're_encrypt',
  'generate_data_key',
  'wrap',
  'unwrap',
  'sign',
  'verify',
  'mac',
  'mac_verify',
] as const
export type KeyOperation = (typeof KEY_OPERATIONS)[number]

export interface KeyRestriction {
  /** Key ids (UUIDs, lower case) and aliases (`alias/...`); null: any key of the tenant. */
  readonly keys: readonly string[] | null
  /** null: every operation the scopes allow. */
  readonly operations: readonly KeyOperation[] | null
}

/** Entries of a restriction's key list at most. */
export const MAX_RESTRICTED_KEYS = 100

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

/** A key id (either case) or an alias (`alias/<name>`): the pattern of one entry of `keys`. */
export const KEY_ENTRY_PATTERN =
  '^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|alias/[A-Za-z0-9/_-]{1,250})$'

/** Whether an entry of `keys` is a key id (else an alias). */
export const isKeyIdEntry = (entry: string): boolean => UUID.test(entry)

/**
 * The entries as stored: key ids in lower case (as every key id is), aliases as written, each
 * once, in the order first given.
 */
export function normalizeKeyEntries(entries: readonly string[]): string[] {
  return [...new Set(entries.map((entry) => (isKeyIdEntry(entry) ? entry.toLowerCase() : entry)))]
}

/** The restriction of an API key's stored lists; null when it names neither. */
export function keyRestrictionOf(
  keys: readonly string[] | null | undefined,
  operations: readonly string[] | null | undefined,
): KeyRestriction | null {
  if (!keys && !operations) return null
  return { keys: keys ?? null, operations: (operations as readonly KeyOperation[] | null) ?? null }
}

/**
 * Whether the restriction admits `operation` on the key `keyId`, whose aliases are `aliases` now
 * (an alias in the restriction follows the alias when it moves to another key, as AWS KMS's
 * alias conditions do). No restriction: everything the scopes allow.
 */
export function restrictionAllows(
  restriction: KeyRestriction | null | undefined,
  key: { id: string; aliases: readonly string[] },
  operation: KeyOperation | null,
): boolean {
  if (!restriction) return true
  if (operation !== null && restriction.operations !== null && !restriction.operations.includes(operation))
    return false
  if (restriction.keys === null) return true
  return restriction.keys.some((entry) => entry === key.id || key.aliases.includes(entry))
}

/** One way a restriction is wider than another: `entries` it names that the other does not, or null (it names none: all). */
export interface RestrictionExcess {
  field: 'keys' | 'operations'
  entries: string[] | null
}

/**
 * What `wider` admits that `narrower` does not, list by list; empty when `wider` is within
 * `narrower`. Entries are compared as written (normalised): an alias and the key id it names
 * now are different entries, since the alias can move.
 */
export function restrictionExcess(
  wider: KeyRestriction | null | undefined,
  narrower: KeyRestriction | null | undefined,
): RestrictionExcess[] {
  const excess: RestrictionExcess[] = []
  const compare = (
    field: 'keys' | 'operations',
    w: readonly string[] | null,
    n: readonly string[] | null,
  ) => {
    if (n === null) return
    if (w === null) excess.push({ field, entries: null })
    else {
      const outside = w.filter((entry) => !n.includes(entry))
      if (outside.length > 0) excess.push({ field, entries: outside })
    }
  }
  compare('keys', wider?.keys ?? null, narrower?.keys ?? null)
  compare('operations', wider?.operations ?? null, narrower?.operations ?? null)
  return excess
}
