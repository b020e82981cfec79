import { ApiError, api, must, type Schemas } from '../../api/client.ts'
import { type AuditSearch, defined, oneOf } from '../../search.ts'

/**
 * Reading the audit log (GET /api/v1/audit, docs/audit.md): newest first, cursor-paged (`cursor`
 * is the id of the last record seen; the next page is the records with a lower id). The API
 * filters by action, resource, outcome and time range; it has no actor filter, so the console
 * filters by actor itself, reading the API's pages until a page of matching records is full.
 */
export type AuditRecord = Schemas['AuditRecord']
type Outcome = AuditRecord['outcome']

export const OUTCOMES: readonly Outcome[] = ['success', 'failure', 'denied']

/** Records per page of the table. */
export const PAGE_SIZE = 50
/** At most this many records in one export (JSON lines). */
export const EXPORT_LIMIT = 10_000
/** Records the console reads for one page of an actor filter before it stops and says so. */
export const PAGE_SCAN_LIMIT = 5_000
/** Records an export filtered by actor reads at most. */
export const EXPORT_SCAN_LIMIT = 100_000
/** The API's largest page, for the console's own reading (actor filter, export). */
const BATCH = 500

/** The list's filters, as the URL holds them (an unknown outcome is dropped). */
export interface AuditFilters {
  action?: string | undefined
  actor?: string | undefined
  resource?: string | undefined
  outcome?: Outcome | undefined
  from?: string | undefined
  to?: string | undefined
}

export function filtersOf(search: AuditSearch): AuditFilters {
  return defined({
    action: search.action,
    actor: search.actor,
    resource: search.resource,
    outcome: oneOf(OUTCOMES, search.outcome),
    from: search.from,
    to: search.to,
  })
}

export const hasFilters = (filters: AuditFilters) =>
  Object.values(filters).some((value) => value !== undefined)

/** The API's query for the filters (the actor is not one of its parameters). */
export function apiQuery(filters: AuditFilters, limit: number, cursor?: string) {
  return defined({
    action: filters.action,
    resource: filters.resource,
    outcome: filters.outcome,
    from: filters.from,
    to: filters.to,
    limit,
    cursor,
  })
}

/** Who an actor is, when the console can tell: a member's e-mail, an API key's name. */
export type ActorNames = ReadonlyMap<string, string>

export async function loadActorNames(canReadApiKeys: boolean): Promise<ActorNames> {
  const names = new Map<string, string>()
  const [members, apiKeys] = await Promise.all([
    api.GET('/api/v1/team/members').then(must),
    canReadApiKeys
      ? api
          .GET('/api/v1/api-keys', { params: { query: { limit: 1000, offset: 0, includeRevoked: true } } })
          .then(must)
      : undefined,
  ])
  for (const member of members.data) names.set(`member:${member.accountId}`, member.email)
  for (const key of apiKeys?.data ?? []) names.set(`apikey:${key.id}`, `API key “${key.name}”`)
  return names
}

/** The actor filter: any part of the actor (`apikey:<id>`, `member:<id>`, ...) or of its name. */
function actorMatches(record: AuditRecord, actor: string | undefined, names: ActorNames): boolean {
  if (!actor) return true
  const needle = actor.toLowerCase()
  return (
    record.actor.toLowerCase().includes(needle) ||
    (names.get(record.actor)?.toLowerCase().includes(needle) ?? false)
  )
}

async function apiPage(
  filters: AuditFilters,
  limit: number,
  cursor: string | undefined,
  signal?: AbortSignal,
) {
  return must(await api.GET('/api/v1/audit', { params: { query: apiQuery(filters, limit, cursor) }, signal }))
}

export interface AuditPage {
  records: AuditRecord[]
  /** Where the next page starts (null: no more records). */
  nextCursor: string | null
  /** With an actor filter: the records read for this page. */
  scanned: number
  /** The actor filter read PAGE_SCAN_LIMIT records without filling the page. */
  scanLimited: boolean
}

/** One page of the table, from `cursor` on. */
export async function readPage(
  filters: AuditFilters,
  cursor: string | undefined,
  names: ActorNames,
  signal?: AbortSignal,
): Promise<AuditPage> {
  if (!filters.actor) {
    const answer = await apiPage(filters, PAGE_SIZE, cursor, signal)
    return {
      records: answer.data,
      nextCursor: answer.nextCursor,
      scanned: answer.data.length,
      scanLimited: false,
    }
  }
  const records: AuditRecord[] = []
  let scanned = 0
  let next = cursor
  for (;;) {
    const answer = await apiPage(filters, BATCH, next, signal)
    for (const [index, record] of answer.data.entries()) {
      scanned++
      if (!actorMatches(record, filters.actor, names)) continue
      records.push(record)
      if (records.length === PAGE_SIZE) {
        const last = index === answer.data.length - 1 && answer.nextCursor === null
        return { records, nextCursor: last ? null : record.id, scanned, scanLimited: false }
      }
    }
    if (answer.nextCursor === null) return { records, nextCursor: null, scanned, scanLimited: false }
    next = answer.nextCursor
    if (scanned >= PAGE_SCAN_LIMIT) return { records, nextCursor: next, scanned, scanLimited: true }
  }
}

export interface ExportResult {
  records: AuditRecord[]
  /** Why it stopped before the last matching record: the record bound or the read bound. */
  stopped: 'limit' | 'scan' | null
}

/** The records matching the filters, newest first, up to EXPORT_LIMIT. */
export async function exportRecords(
  filters: AuditFilters,
  names: ActorNames,
  signal: AbortSignal,
  onProgress: (count: number) => void,
): Promise<ExportResult> {
  const records: AuditRecord[] = []
  let scanned = 0
  let cursor: string | undefined
  for (;;) {
    const answer = await apiPage(filters, BATCH, cursor, signal)
    for (const [index, record] of answer.data.entries()) {
      scanned++
      if (!actorMatches(record, filters.actor, names)) continue
      records.push(record)
      if (records.length === EXPORT_LIMIT) {
        const last = index === answer.data.length - 1 && answer.nextCursor === null
        return { records, stopped: last ? null : 'limit' }
      }
    }
    onProgress(records.length)
    if (answer.nextCursor === null) return { records, stopped: null }
    if (filters.actor && scanned >= EXPORT_SCAN_LIMIT) return { records, stopped: 'scan' }
    cursor = answer.nextCursor
  }
}

/** JSON lines: one record per line, as the API answers it. */
export const jsonLines = (records: readonly AuditRecord[]) =>
  records.map((record) => `${JSON.stringify(record)}\n`).join('')

/** A refusal that retrying will not change (4xx): shown at once. */
export const retryable = (failures: number, error: unknown) =>
  failures < 1 && !(error instanceof ApiError && error.status < 500)

/** datetime-local value (the browser's time zone) of an ISO time; '' when there is none. */
export function toLocalInput(iso: string | undefined): string {
  if (!iso) return ''
  const date = new Date(iso)
  if (Number.isNaN(date.getTime())) return ''
  const pad = (value: number) => String(value).padStart(2, '0')
  const seconds = date.getSeconds() === 0 ? '' : `:${pad(date.getSeconds())}`
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}${seconds}`
}

/** The ISO time of a datetime-local value; null when it is not a time. */
export function fromLocalInput(value: string): string | null {
  const date = new Date(value)
  return Number.isNaN(date.getTime()) ? null : date.toISOString()
}

const TIME = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' })
export const formatTime = (iso: string) => TIME.format(new Date(iso))
