import type { KeyRestriction } from '../auth/key-restriction.ts'
import type { Queryable } from '../data/database.ts'
import { AppError, notFound } from '../platform/errors.ts'
import { isAliasRef, keyIdOfRef } from './alias-name.ts'
import { aliasTargets, getAlias } from './alias-store.ts'

/**
 * Key references on the management routes (/keys/{keyId}..., /aliases): an id or an alias,
 * resolved against the database (the key cache serves the cryptographic operations:
 * crypto/key-resolver.ts), and an API key's restriction to keys (auth/key-restriction.ts).
 */

/**
 * Who refers to a key: the tenant, and what its API key is restricted to (an Actor is one); no
 * restriction: whatever the route's scopes allow. The key resolver takes the same.
 */
export interface RefCaller {
  tenantId: string
  keyRestriction?: KeyRestriction | null | undefined
}

/** A reference resolved: the key's id, and the alias it was named by (null: by its id). */
export interface ResolvedRef {
  id: string
  alias: string | null
}

/**
 * 403: the caller's API key is restricted to other keys. Said as well when the reference names no
 * key at all, so a restricted API key learns nothing of the keys and aliases outside its list.
 */
export const keyNotAllowed = () =>
  new AppError(403, 'key_not_allowed', 'This API key is restricted to other keys')

const restrictedToKeys = (caller: RefCaller) => (caller.keyRestriction?.keys ?? null) !== null

/**
 * The keys a caller restricted to keys may use, as ids: its list's ids and the keys its list's
 * aliases name now; null when it is not restricted to keys.
 */
export async function allowedKeyIds(db: Queryable, caller: RefCaller): Promise<string[] | null> {
  const keys = caller.keyRestriction?.keys
  if (!keys) return null
  const ids = keys.filter((entry) => !isAliasRef(entry))
  const targets = await aliasTargets(db, caller.tenantId, keys.filter(isAliasRef))
  return [...new Set([...ids, ...targets.values()])]
}

/** 403 unless the caller may use the key `keyId` (by its id, or an alias of its list naming it now). */
export async function requireKeyAllowed(db: Queryable, caller: RefCaller, keyId: string): Promise<void> {
  const keys = caller.keyRestriction?.keys
  if (!keys || keys.includes(keyId)) return
  const aliases = keys.filter(isAliasRef)
  if (aliases.length > 0 && [...(await aliasTargets(db, caller.tenantId, aliases)).values()].includes(keyId))
    return
  throw keyNotAllowed()
}

/**
 * The key a reference names in the caller's tenant, which the caller may use. An alias naming
 * nothing is 404 key_not_found (403 for a caller restricted to keys); an id is not looked up here
 * (the caller reads the key and says 404 itself).
 */
export async function resolveKeyRef(db: Queryable, caller: RefCaller, ref: string): Promise<ResolvedRef> {
  let resolved: ResolvedRef | undefined
  if (isAliasRef(ref)) {
    const row = await getAlias(db, caller.tenantId, ref)
    if (row) resolved = { id: row.key_id, alias: ref }
  } else {
    const id = keyIdOfRef(ref)
    if (id) resolved = { id, alias: null }
  }
  if (!resolved) throw restrictedToKeys(caller) ? keyNotAllowed() : notFound('key_not_found', 'Key')
  await requireKeyAllowed(db, caller, resolved.id)
  return resolved
}
