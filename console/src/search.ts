/**
 * Search parameters of the console's lists: every filter, sort and page lives in the URL, so a
 * list can be bookmarked, shared and reloaded as it was. Each reader keeps only well-formed
 * values (anything else is dropped, never an error page).
 */

/**
 * A text parameter. The router reads search values as JSON, so a hand-typed `?actor=12345678`
 * arrives as a number: it is kept as its text (the console's own links quote such values).
 */
const text = (value: unknown, max = 200): string | undefined => {
  const given = typeof value === 'number' && Number.isFinite(value) ? String(value) : value
  return typeof given === 'string' && given.length > 0 && given.length <= max ? given : undefined
}

const positive = (value: unknown): number | undefined => {
  const number = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : Number.NaN
  return Number.isInteger(number) && number >= 1 && number <= 100_000 ? number : undefined
}

export const oneOf = <T extends string>(allowed: readonly T[], value: unknown): T | undefined =>
  typeof value === 'string' && (allowed as readonly string[]).includes(value) ? (value as T) : undefined

const texts = (value: unknown, max = 20): string[] | undefined => {
  const list = Array.isArray(value) ? value : typeof value === 'string' ? [value] : []
  const kept = list.filter(
    (item): item is string => typeof item === 'string' && item.length > 0 && item.length <= 200,
  )
  return kept.length > 0 ? kept.slice(0, max) : undefined
}

/** Drops undefined fields, so the URL carries only what is set. */
export const defined = <T extends Record<string, unknown>>(value: T): T =>
  Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T

export interface KeysSearch {
  q?: string | undefined
  type?: string | undefined
  algorithm?: string | undefined
  status?: string | undefined
  labels?: string[] | undefined
  sort?: string | undefined
  page?: number | undefined
}
export const keysSearch = (search: Record<string, unknown>): KeysSearch =>
  defined({
    q: text(search['q']),
    type: text(search['type'], 40),
    algorithm: text(search['algorithm'], 40),
    status: text(search['status'], 40),
    labels: texts(search['labels']),
    sort: text(search['sort'], 40),
    page: positive(search['page']),
  })

export interface TrySearch {
  keyId?: string | undefined
  op?: 'encrypt' | 'decrypt' | 'sign' | 'verify' | 'mac' | 'data-key' | undefined
}
export const trySearch = (search: Record<string, unknown>): TrySearch =>
  defined({
    keyId: text(search['keyId'], 64),
    op: oneOf(['encrypt', 'decrypt', 'sign', 'verify', 'mac', 'data-key'] as const, search['op']),
  })

export interface SecretsSearch {
  folder?: string | undefined
  q?: string | undefined
  trash?: boolean | undefined
  page?: number | undefined
}
export const secretsSearch = (search: Record<string, unknown>): SecretsSearch =>
  defined({
    folder: text(search['folder'], 300),
    q: text(search['q']),
    trash: search['trash'] === true || search['trash'] === 'true' ? true : undefined,
    page: positive(search['page']),
  })

export interface AuditSearch {
  action?: string | undefined
  actor?: string | undefined
  resource?: string | undefined
  outcome?: string | undefined
  from?: string | undefined
  to?: string | undefined
  page?: number | undefined
}
export const auditSearch = (search: Record<string, unknown>): AuditSearch =>
  defined({
    action: text(search['action']),
    actor: text(search['actor']),
    resource: text(search['resource']),
    outcome: text(search['outcome'], 20),
    from: text(search['from'], 40),
    to: text(search['to'], 40),
    page: positive(search['page']),
  })

export interface ListSearch {
  q?: string | undefined
  page?: number | undefined
}
export const listSearch = (search: Record<string, unknown>): ListSearch =>
  defined({ q: text(search['q']), page: positive(search['page']) })
