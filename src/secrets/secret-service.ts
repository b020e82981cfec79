import { randomUUID, timingSafeEqual } from 'node:crypto'
import type { Static } from 'typebox'
import type { AuditLog } from '../audit/audit-log.ts'
import type { AuditEntry } from '../audit/audit-store.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Queryable, Sql } from '../data/database.ts'
import { toDate } from '../http/http-schemas.ts'
import { parseInclude } from '../http/include.ts'
import { type Clock, DAY_MS } from '../platform/clock.ts'
import {
  AppError,
  invalidField,
  isForeignKeyViolation,
  isUniqueViolation,
  notFound,
} from '../platform/errors.ts'
import { TotpInputError, totpCode } from '../platform/totp.ts'
import type { FolderService } from './folder-service.ts'
import {
  type CreateSecretBody,
  type CustomFieldInput,
  INCLUDE_FIELDS,
  type IncludeField,
  type ListSecretsQuery,
  METADATA_FIELDS,
  type SecretSchema,
  type SecretVersionSchema,
  type TotpCodeSchema,
  type UpdateSecretBody,
} from './secret-schemas.ts'
import type { SecretDataKey, SecretSealing } from './secret-sealing.ts'
import {
  countSecretsInUse,
  currentValues,
  findSecret,
  findVersion,
  insertSecret,
  insertVersion,
  listSecrets,
  listVersions,
  lockSecrets,
  moveSecrets,
  pruneVersions,
  purgeDeletedBefore,
  purgeSecret,
  type SecretChanges,
  type SecretRow,
  type StoredCustomField,
  updateSecret,
} from './secret-store.ts'
import { deserializeTotp, parseTotpInput, serializeTotp, type TotpInput } from './totp.ts'

/** Deleted secrets can be restored for this long, then they are purged with every version. */
const RESTORE_WINDOW_DAYS = 30

type SecretView = Static<typeof SecretSchema>
type VersionView = Static<typeof SecretVersionSchema>
type TotpCodeView = Static<typeof TotpCodeSchema>

/** What a read returns: the fields `include` selected, and whether it reveals the value. */
export interface Selection {
  fields: ReadonlySet<IncludeField>
  all: boolean
}

export function parseSecretInclude(text: string | undefined): Selection {
  const { fields, tokens } = parseInclude(text, INCLUDE_FIELDS, {
    metadata: METADATA_FIELDS,
    all: INCLUDE_FIELDS,
  })
  return { fields, all: tokens.has('all') }
}

/** Write responses show the record without decrypting anything. */
const METADATA: Selection = { fields: new Set(METADATA_FIELDS), all: false }

export interface SecretService {
  /** Secrets not deleted (billing's usage report). */
  countInUse(tenantId: string): Promise<number>
  create(actor: Actor, body: CreateSecretBody): Promise<SecretView>
  get(actor: Actor, id: string, selection: Selection): Promise<SecretView>
  list(
    actor: Actor,
    query: ListSecretsQuery,
    selection: Selection,
  ): Promise<{ data: SecretView[]; total: number }>
  update(actor: Actor, id: string, body: UpdateSecretBody): Promise<SecretView>
  /** Soft deletion (restorable), or `permanent`: purged now. */
  remove(actor: Actor, id: string, permanent: boolean): Promise<SecretView | null>
  restore(actor: Actor, id: string): Promise<SecretView>
  move(actor: Actor, ids: string[], folderId: string | null): Promise<number>
  versions(actor: Actor, id: string): Promise<VersionView[]>
  version(actor: Actor, id: string, version: number, withValue: boolean): Promise<VersionView>
  totp(actor: Actor, id: string): Promise<TotpCodeView>
  /** Purges secrets deleted longer ago than the restore window; returns how many. */
  purgeDue(requestId?: string | null): Promise<number>
}

const secretNotFound = () => notFound('secret_not_found', 'Secret')
const nameTaken = () =>
  new AppError(409, 'secret_name_taken', 'A secret with this name already exists in the folder')
const inactive = () =>
  new AppError(
    409,
    'secret_inactive',
    'The secret is inactive: its value cannot be read until it is activated',
  )

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/

function checkCustomValue(field: CustomFieldInput, path: string): void {
  const { type, value } = field
  const fail: (message: string) => never = (message) => {
    throw invalidField(`${path}/value`, message)
  }
  if (type === 'number') {
    if (typeof value !== 'number') fail('must be a number for type number')
    return
  }
  if (type === 'boolean') {
    if (typeof value !== 'boolean') fail('must be a boolean for type boolean')
    return
  }
  if (typeof value !== 'string') fail(`must be a string for type ${type}`)
  if (type === 'url' && !URL.canParse(value)) fail('must be an absolute URL')
  if (type === 'email' && !EMAIL.test(value)) fail('must be an email address')
  if (type === 'date') {
    const match = DATE.exec(value)
    const date = match ? new Date(`${value}T00:00:00Z`) : null
    if (!date || Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== value) {
      fail('must be a date as YYYY-MM-DD')
    }
  }
}

/** Clear part (names, types, non-sensitive values) and the sensitive values to seal. */
function splitCustomFields(fields: CustomFieldInput[]): {
  stored: StoredCustomField[]
  sensitive: Record<string, string | number | boolean> | null
} {
  const names = new Set<string>()
  const stored: StoredCustomField[] = []
  let sensitive: Record<string, string | number | boolean> | null = null
  fields.forEach((field, index) => {
    const path = `/customFields/${index}`
    if (names.has(field.name)) throw invalidField(`${path}/name`, 'repeats another custom field name')
    names.add(field.name)
    checkCustomValue(field, path)
    if (field.sensitive) {
      sensitive ??= {}
      sensitive[field.name] = field.value
      stored.push({ name: field.name, type: field.type, sensitive: true })
    } else {
      stored.push({ name: field.name, type: field.type, sensitive: false, value: field.value })
    }
  })
  return { stored, sensitive }
}

function parseTotp(input: TotpInput) {
  try {
    return parseTotpInput(input)
  } catch (error) {
    if (error instanceof TotpInputError) throw invalidField('/totp', error.message)
    throw error
  }
}

const utf8 = (text: string) => Buffer.from(text, 'utf8')

function sameBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}

export function createSecretService(deps: {
  sql: Sql
  audit: AuditLog
  sealing: SecretSealing
  folders: Pick<FolderService, 'requireFolder'>
  clock: Clock
  /** Value versions kept per secret, the current one included. */
  versionsKept: number
}): SecretService {
  const { sql, audit, sealing, clock } = deps

  const entry = (actor: Actor, action: string, id: string, extra: Partial<AuditEntry> = {}): AuditEntry => ({
    tenantId: actor.tenantId,
    actor: actor.actor,
    action,
    resource: `secret:${id}`,
    outcome: 'success',
    requestId: actor.requestId,
    clientIp: actor.clientIp,
    ...extra,
  })

  const restoreDeadline = (now: Date) => new Date(now.getTime() - RESTORE_WINDOW_DAYS * DAY_MS)

  /**
   * The projection of a row. Sealed content is opened only for the fields asked for; the fields
   * revealed are returned so the caller audits the access before answering.
   */
  async function project(
    row: SecretRow,
    selection: Selection,
    db: Queryable = sql,
    /** The sealed current values of a page, read in one query (see `list`). */
    sealedValues?: ReadonlyMap<string, Buffer>,
  ): Promise<{ view: SecretView; revealed: string[] }> {
    const { fields } = selection
    const view: SecretView = { id: row.id, name: row.name, version: row.current_version }
    const revealed: string[] = []
    // An inactive or deleted secret reveals nothing sealed: a list leaves its content out (the
    // single-secret routes refuse them, and the trash list must not be a way around that).
    const readable = row.is_active && row.deleted_at === null
    const reveal = selection.all && readable
    const showNotes = fields.has('notes') && readable
    const needsKey = (showNotes && row.sealed_notes) || reveal
    const key = needsKey ? await sealing.open(row.tenant_id, row.id, row.sealed_dek, db) : null
    if (reveal && key) {
      const sealed =
        sealedValues?.get(row.id) ?? (await findVersion(db, row.id, row.current_version))!.sealed_value
      view.value = key.open(`value:${row.current_version}`, sealed).toString('utf8')
      revealed.push('value')
    }
    if (fields.has('customFields')) {
      const sensitive =
        reveal && key && row.sealed_custom_values
          ? (JSON.parse(key.open('custom-values', row.sealed_custom_values).toString('utf8')) as Record<
              string,
              string | number | boolean
            >)
          : null
      if (sensitive) revealed.push('customFields')
      view.customFields = row.custom_fields.map((f) => ({
        name: f.name,
        type: f.type,
        sensitive: f.sensitive,
        value: f.sensitive ? (sensitive?.[f.name] ?? null) : (f.value ?? null),
      }))
    }
    if (showNotes) {
      view.notes = row.sealed_notes && key ? key.open('notes', row.sealed_notes).toString('utf8') : null
      if (row.sealed_notes) revealed.push('notes')
    }
    if (fields.has('labels')) view.labels = row.labels
    if (fields.has('description')) view.description = row.description
    if (fields.has('expiresAt')) view.expiresAt = row.expires_at?.toISOString() ?? null
    if (fields.has('folderId')) view.folderId = row.folder_id
    if (fields.has('isActive')) view.isActive = row.is_active
    if (fields.has('isFavorite')) view.isFavorite = row.is_favorite
    if (fields.has('hasTotp')) view.hasTotp = row.sealed_totp !== null
    if (fields.has('isTravelSafe')) view.isTravelSafe = row.is_travel_safe
    if (fields.has('createdAt')) view.createdAt = row.created_at.toISOString()
    if (fields.has('updatedAt')) view.updatedAt = row.updated_at.toISOString()
    if (fields.has('createdBy')) view.createdBy = row.created_by
    if (fields.has('updatedBy')) view.updatedBy = row.updated_by
    return { view, revealed }
  }

  const accessEntry = (
    actor: Actor,
    row: SecretRow,
    fields: string[],
    version: number | null = row.current_version,
  ) =>
    entry(actor, 'secrets.value.read', row.id, { keyVersion: version, details: { fields: fields.join(',') } })

  /** Writes that hit a unique index answer 409 instead of failing. */
  async function writing<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work()
    } catch (error) {
      if (isUniqueViolation(error, 'secrets_folder_name_idx')) throw nameTaken()
      // The folder was deleted by a concurrent request after it was checked.
      if (isForeignKeyViolation(error, 'secrets_folder_id_fkey')) throw notFound('folder_not_found', 'Folder')
      throw error
    }
  }

  function sealCustom(key: SecretDataKey, sensitive: Record<string, unknown> | null): Buffer | null {
    return sensitive ? key.seal('custom-values', utf8(JSON.stringify(sensitive))) : null
  }

  async function requireLive(db: Queryable, actor: Actor, id: string, lock = false): Promise<SecretRow> {
    const row = await findSecret(db, actor.tenantId, id, { lock })
    if (!row) throw secretNotFound()
    return row
  }

  return {
    countInUse: (tenantId) => countSecretsInUse(sql, tenantId),
    async create(actor, body) {
      const custom = splitCustomFields(body.customFields ?? [])
      const totp = body.totp ? parseTotp(body.totp) : null
      const expiresAt = body.expiresAt ? toDate(body.expiresAt, '/expiresAt') : null
      const now = clock.now()
      const id = randomUUID()
      const row = await writing(() =>
        sql.begin(async (tx) => {
          if (body.folderId) await deps.folders.requireFolder(tx, actor.tenantId, body.folderId)
          const { key, sealedDek } = await sealing.create(actor.tenantId, id, tx)
          const row: SecretRow = {
            id,
            tenant_id: actor.tenantId,
            folder_id: body.folderId ?? null,
            name: body.name,
            description: body.description ?? '',
            labels: [...new Set(body.labels ?? [])],
            custom_fields: custom.stored,
            sealed_dek: sealedDek,
            sealed_notes: typeof body.notes === 'string' ? key.seal('notes', utf8(body.notes)) : null,
            sealed_custom_values: sealCustom(key, custom.sensitive),
            sealed_totp: totp ? key.seal('totp', serializeTotp(totp)) : null,
            current_version: 1,
            expires_at: expiresAt,
            is_active: body.isActive ?? true,
            is_favorite: body.isFavorite ?? false,
            is_travel_safe: body.isTravelSafe ?? false,
            created_at: now,
            created_by: actor.actor,
            updated_at: now,
            updated_by: actor.actor,
            deleted_at: null,
            deleted_by: null,
          }
          await insertSecret(tx, row)
          await insertVersion(tx, {
            secret_id: id,
            version: 1,
            sealed_value: key.seal('value:1', utf8(body.value)),
            created_at: now,
            created_by: actor.actor,
          })
          await audit.recordInTransaction(tx, entry(actor, 'secrets.create', id, { keyVersion: 1 }))
          return row
        }),
      )
      return (await project(row, METADATA)).view
    },

    async get(actor, id, selection) {
      const row = await requireLive(sql, actor, id)
      if ((selection.all || selection.fields.has('notes')) && !row.is_active) throw inactive()
      const { view, revealed } = await project(row, selection)
      if (revealed.length > 0) await audit.record(accessEntry(actor, row, revealed))
      return view
    },

    async list(actor, query, selection) {
      const now = clock.now()
      if (query.folderId && query.folderId !== 'root') {
        await deps.folders.requireFolder(sql, actor.tenantId, query.folderId)
      }
      const { rows, total } = await listSecrets(
        sql,
        actor.tenantId,
        {
          folder: query.folderId === 'root' ? null : query.folderId,
          labels: query.label,
          favorite: query.favorite,
          active: query.active,
          search: query.search,
          deletedAfter: query.deleted ? restoreDeadline(now) : undefined,
        },
        { limit: query.limit, offset: query.offset },
      )
      const sealedValues = selection.all
        ? await currentValues(
            sql,
            rows.filter((row) => row.is_active && row.deleted_at === null),
          )
        : undefined
      const projected = await Promise.all(rows.map((row) => project(row, selection, sql, sealedValues)))
      // One record per secret whose content this page reveals, all durable before the answer.
      await Promise.all(
        projected.flatMap(({ revealed }, i) =>
          revealed.length > 0 ? [audit.record(accessEntry(actor, rows[i]!, revealed))] : [],
        ),
      )
      const data = projected.map(({ view }, i) => {
        const deletedAt = rows[i]!.deleted_at
        if (!deletedAt) return view
        const purgeAt = new Date(deletedAt.getTime() + RESTORE_WINDOW_DAYS * DAY_MS)
        return { ...view, deletedAt: deletedAt.toISOString(), purgeAt: purgeAt.toISOString() }
      })
      return { data, total }
    },

    async update(actor, id, body) {
      const custom = body.customFields ? splitCustomFields(body.customFields) : null
      const totp = body.totp ? parseTotp(body.totp) : null
      const expiresAt = body.expiresAt ? toDate(body.expiresAt, '/expiresAt') : null
      const now = clock.now()
      const row = await writing(() =>
        sql.begin(async (tx) => {
          const current = await requireLive(tx, actor, id, true)
          const key = await sealing.open(actor.tenantId, id, current.sealed_dek, tx)
          const changes: SecretChanges = { updated_at: now, updated_by: actor.actor }
          const changed = Object.keys(body).sort()
          if (body.folderId !== undefined) {
            if (body.folderId) await deps.folders.requireFolder(tx, actor.tenantId, body.folderId)
            changes.folder_id = body.folderId
          }
          if (body.name !== undefined) changes.name = body.name
          if (body.description !== undefined) changes.description = body.description
          if (body.labels !== undefined) changes.labels = [...new Set(body.labels)]
          if (body.notes !== undefined) {
            changes.sealed_notes = body.notes === null ? null : key.seal('notes', utf8(body.notes))
          }
          if (custom) {
            changes.custom_fields = custom.stored
            changes.sealed_custom_values = sealCustom(key, custom.sensitive)
          }
          if (body.totp !== undefined)
            changes.sealed_totp = totp ? key.seal('totp', serializeTotp(totp)) : null
          if (body.expiresAt !== undefined) changes.expires_at = expiresAt
          if (body.isActive !== undefined) changes.is_active = body.isActive
          if (body.isFavorite !== undefined) changes.is_favorite = body.isFavorite
          if (body.isTravelSafe !== undefined) changes.is_travel_safe = body.isTravelSafe
          let version = current.current_version
          if (body.value !== undefined) {
            const stored = await findVersion(tx, id, version)
            const previous = key.open(`value:${version}`, stored!.sealed_value)
            const next = utf8(body.value)
            // The same value again is not a new version.
            if (!sameBytes(previous, next)) {
              version += 1
              await insertVersion(tx, {
                secret_id: id,
                version,
                sealed_value: key.seal(`value:${version}`, next),
                created_at: now,
                created_by: actor.actor,
              })
              await pruneVersions(tx, id, version, deps.versionsKept)
              changes.current_version = version
            }
            previous.fill(0)
            next.fill(0)
          }
          const updated = await updateSecret(tx, id, changes)
          await audit.recordInTransaction(
            tx,
            entry(actor, 'secrets.update', id, {
              keyVersion: version,
              details: { fields: changed.join(',') },
            }),
          )
          return updated
        }),
      )
      return (await project(row, METADATA)).view
    },

    async remove(actor, id, permanent) {
      const now = clock.now()
      return sql.begin(async (tx) => {
        if (permanent) {
          const row =
            (await findSecret(tx, actor.tenantId, id, { lock: true })) ??
            (await findSecret(tx, actor.tenantId, id, { lock: true, deleted: true }))
          if (!row) throw secretNotFound()
          await purgeSecret(tx, id)
          await audit.recordInTransaction(tx, entry(actor, 'secrets.purge', id))
          return null
        }
        await requireLive(tx, actor, id, true)
        const row = await updateSecret(tx, id, { deleted_at: now, deleted_by: actor.actor })
        await audit.recordInTransaction(tx, entry(actor, 'secrets.delete', id))
        const purgeAt = new Date(now.getTime() + RESTORE_WINDOW_DAYS * DAY_MS)
        return {
          ...(await project(row, METADATA, tx)).view,
          deletedAt: now.toISOString(),
          purgeAt: purgeAt.toISOString(),
        }
      })
    },

    async restore(actor, id) {
      const now = clock.now()
      const outcome = await writing(() =>
        sql.begin(async (tx) => {
          const row = await findSecret(tx, actor.tenantId, id, { lock: true, deleted: true })
          if (!row) return null
          if (row.deleted_at! <= restoreDeadline(now)) {
            // Past its window: the purge the sweep would do happens now.
            await purgeSecret(tx, id)
            await audit.recordInTransaction(tx, {
              ...entry(actor, 'secrets.purge', id),
              actor: 'system:lifecycle',
            })
            return null
          }
          const restored = await updateSecret(tx, id, {
            deleted_at: null,
            deleted_by: null,
            updated_at: now,
            updated_by: actor.actor,
          })
          await audit.recordInTransaction(tx, entry(actor, 'secrets.restore', id))
          return restored
        }),
      )
      if (!outcome) throw secretNotFound()
      return (await project(outcome, METADATA)).view
    },

    async move(actor, requested, folderId) {
      const now = clock.now()
      const ids = [...new Set(requested)]
      return writing(() =>
        sql.begin(async (tx) => {
          if (folderId) await deps.folders.requireFolder(tx, actor.tenantId, folderId)
          const rows = await lockSecrets(tx, actor.tenantId, ids)
          if (rows.length !== ids.length) {
            const found = new Set(rows.map((r) => r.id))
            throw new AppError(404, 'secret_not_found', 'Some secrets were not found; none was moved', {
              missing: ids.filter((id) => !found.has(id)),
            })
          }
          await moveSecrets(tx, ids, folderId, now, actor.actor)
          for (const id of ids) {
            await audit.recordInTransaction(tx, entry(actor, 'secrets.move', id, { details: { folderId } }))
          }
          return ids.length
        }),
      )
    },

    async versions(actor, id) {
      const row = await requireLive(sql, actor, id)
      const rows = await listVersions(sql, id)
      return rows.map((v) => ({
        version: v.version,
        createdAt: v.created_at.toISOString(),
        createdBy: v.created_by,
        isCurrent: v.version === row.current_version,
      }))
    },

    async version(actor, id, version, withValue) {
      const row = await requireLive(sql, actor, id)
      const stored = await findVersion(sql, id, version)
      if (!stored) throw notFound('secret_version_not_found', 'Secret version')
      const view: VersionView = {
        version,
        createdAt: stored.created_at.toISOString(),
        createdBy: stored.created_by,
        isCurrent: version === row.current_version,
      }
      if (!withValue) return view
      if (!row.is_active) throw inactive()
      const key = await sealing.open(actor.tenantId, id, row.sealed_dek)
      view.value = key.open(`value:${version}`, stored.sealed_value).toString('utf8')
      await audit.record(accessEntry(actor, row, ['value'], version))
      return view
    },

    async totp(actor, id) {
      const row = await requireLive(sql, actor, id)
      if (!row.sealed_totp) throw notFound('totp_not_configured', 'A TOTP seed for this secret')
      if (!row.is_active) throw inactive()
      const key = await sealing.open(actor.tenantId, id, row.sealed_dek)
      const settings = deserializeTotp(key.open('totp', row.sealed_totp))
      const now = clock.now()
      const code = totpCode(settings, now)
      settings.seed.fill(0)
      await audit.record(accessEntry(actor, row, ['totp'], null))
      return {
        code: code.code,
        algorithm: settings.algorithm,
        digits: settings.digits,
        period: settings.period,
        validFrom: code.validFrom.toISOString(),
        validUntil: code.validUntil.toISOString(),
        remainingSeconds: Math.ceil((code.validUntil.getTime() - now.getTime()) / 1000),
      }
    },

    async purgeDue(requestId) {
      const before = restoreDeadline(clock.now())
      let purged = 0
      for (;;) {
        const batch = await sql.begin(async (tx) => {
          const rows = await purgeDeletedBefore(tx, before, 500)
          for (const row of rows) {
            await audit.recordInTransaction(tx, {
              tenantId: row.tenant_id,
              actor: 'system:lifecycle',
              action: 'secrets.purge',
              resource: `secret:${row.id}`,
              outcome: 'success',
              requestId: requestId ?? null,
            })
          }
          return rows.length
        })
        purged += batch
        if (batch < 500) return purged
      }
    },
  }
}
