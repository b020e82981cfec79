import { type KeyObject, randomUUID, X509Certificate } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Queryable, Sql } from '../data/database.ts'
import type { TenantKeks } from '../keyring/tenant-kek.ts'
import type { AlgorithmName, KeyType } from '../keys/algorithms.ts'
import { resolveKeyRef } from '../keys/alias-refs.ts'
import { type KeyState, requireState } from '../keys/key-state.ts'
import type { OutboundClient } from '../outbound/outbound-client.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, invalidField, isUniqueViolation, notFound } from '../platform/errors.ts'
import { isUuid } from '../platform/ids.ts'
import { clipText } from '../platform/text.ts'
import {
  CONNECTION_NAME_CONSTRAINT,
  type ConnectionRow,
  claimDue,
  countExportsOfConnection,
  deleteConnection,
  deleteExport,
  type ExportRow,
  getConnection,
  getExport,
  insertConnection,
  insertExport,
  listConnections,
  listExports,
  lockConnection,
  recordFailure,
  recordSuccess,
  replaceCredentials,
  requestSync,
  stopExports,
} from './cloud-export-store.ts'
import { originOf } from './custom-endpoints.ts'
import {
  CloudFieldError,
  type CloudProvider,
  type CloudProviderAdapter,
  CloudProviderError,
  type ConnectionContext,
  type EndpointField,
} from './provider.ts'

/** After the n-th failed attempt, the next one waits BACKOFF_MS[n - 1]; past the list, the sync has failed. */
const SYNC_BACKOFF_MS = [10_000, 60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000] as const
const MAX_SYNC_ATTEMPTS = SYNC_BACKOFF_MS.length + 1
/** How long a job process holds an export it is pushing (a crashed one lets go after this). */
const LEASE_MS = 5 * 60_000
/**
 * A whole push (every exchange, every poll) ends before its lease does, so no other job process
 * can claim the export while the first is still talking to the cloud. A connection test, run in
 * an API request, has less.
 */
const PUSH_DEADLINE_MS = 4 * 60_000
const TEST_DEADLINE_MS = 30_000
const CLAIM_BATCH = 20
const PUSH_CONCURRENCY = 4
/** States whose key may be pushed: a revoked or deleted key is not copied anywhere anymore. */
const EXPORTABLE_STATES: readonly KeyState[] = ['Active', 'Expired']
/**
 * A key not created or imported with `exportable: true` never leaves, by the private-key export
 * route or by a cloud export (the same code as POST /keys/{id}/export-private answers).
 */
const NOT_EXPORTABLE =
  'The key was not created or imported with exportable: true; its private key is not sent to a cloud KMS'
const notExportable = () => new AppError(409, 'key_not_exportable', NOT_EXPORTABLE)

interface ConnectionView {
  id: string
  name: string
  provider: CloudProvider
  /** The non-secret fields; credentials are never returned. */
  settings: Record<string, unknown>
  createdAt: string
  updatedAt: string
  credentialsUpdatedAt: string
}

interface ExportView {
  id: string
  keyId: string
  connectionId: string
  provider: CloudProvider
  target: Record<string, unknown>
  syncStatus: ExportRow['sync_status']
  /** The key version that should be at the cloud. */
  desiredVersion: number
  attempts: number
  nextAttemptAt: string | null
  lastAttemptAt: string | null
  lastSyncAt: string | null
  lastSyncVersion: number | null
  lastSyncError: { code: string; message: string } | null
  /** What holds the key at the cloud (an AWS key ARN, an Azure key id, a GCP key version name ...). */
  providerKeyId: string | null
  createdAt: string
}

interface ConnectionTestResult {
  status: 'ok' | 'failed'
  error: { code: string; message: string } | null
}

/** What the cloud export needs of the keys module. */
export interface ExportableKeys {
  describe(
    tenantId: string,
    keyId: string,
  ): Promise<
    | {
        algorithm: AlgorithmName
        keyType: KeyType
        currentVersion: number
        state: KeyState
        /** Fixed at creation or import: false, the private key never leaves (409 key_not_exportable). */
        exportable: boolean
      }
    | undefined
  >
  /** The private and public KeyObjects of one version; undefined once erased, or if the key is not exportable. */
  material(
    tenantId: string,
    keyId: string,
    version: number,
  ): Promise<{ privateKey: KeyObject; publicKey: KeyObject } | undefined>
}

/**
 * Who may call each method is the routes' declaration (cloud-export-routes.ts: what sends private
 * keys out of the service needs keys:write and keys:export); what depends on the data, such as a
 * key created exportable, is checked here.
 */
export interface CloudExportService {
  createConnection(
    actor: Actor,
    input: {
      name: string
      provider: CloudProvider
      settings: Record<string, unknown>
      credentials: Record<string, unknown>
    },
  ): Promise<ConnectionView>
  listConnections(actor: Actor): Promise<{ data: ConnectionView[]; total: number }>
  getConnection(actor: Actor, id: string): Promise<ConnectionView>
  /** New credentials replace the old at once; the next push uses them. */
  rotateCredentials(actor: Actor, id: string, credentials: Record<string, unknown>): Promise<ConnectionView>
  /** 409 `connection_in_use` while an export uses it. */
  deleteConnection(actor: Actor, id: string): Promise<void>
  /** One authenticated call to the provider; a failure is the answer, not an error. */
  testConnection(actor: Actor, id: string): Promise<ConnectionTestResult>
  createExport(
    actor: Actor,
    keyId: string,
    input: { connectionId: string; target: Record<string, unknown> },
  ): Promise<ExportView>
  listExports(actor: Actor, keyId: string): Promise<{ data: ExportView[]; total: number }>
  getExport(actor: Actor, keyId: string, id: string): Promise<ExportView>
  deleteExport(actor: Actor, keyId: string, id: string): Promise<void>
  /** The current version is pushed by the job process (202): the export is pending, due now. */
  requestSync(actor: Actor, keyId: string, id: string): Promise<ExportView>
  /**
   * In the transaction that adds a key version (a rotation): the key's exports become pending
   * for it. Nothing slow, nothing that can fail the rotation but the database itself.
   */
  keyVersionAdded(
    tx: Queryable,
    event: { tenantId: string; keyId: string; version: number; now: Date },
  ): Promise<void>
  /** The job process: pushes what is due, records each outcome, schedules retries. */
  syncDue(): Promise<{ attempted: number; succeeded: number; failed: number }>
}

const MAX_CA_PEM = 16_384

/**
 * Cloud KMS export (docs/cloud-export.md): connections hold a tenant's cloud credentials, sealed
 * by the tenant KEK and never returned; exports name a key and a place at the cloud. Pushes run
 * in the job process (never inside a request or a transaction), through each provider's import
 * protocol and the guarded outbound client, retried with backoff; every outcome is on the export
 * and in the audit log.
 */
export function createCloudExportService(deps: {
  sql: Sql
  clock: Clock
  audit: AuditLog
  tenantKeks: TenantKeks
  outbound: OutboundClient
  keys: ExportableKeys
  adapters: Partial<Record<CloudProvider, CloudProviderAdapter>>
  /** Each HTTP exchange with a cloud. */
  timeoutMs: number
  /**
   * KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS: the origins, other than the providers' own hosts, that
   * connections and targets may name (custom-endpoints.ts). Empty: none.
   */
  customEndpoints: readonly string[]
  logger?: { warn(obj: object, message: string): void }
}): CloudExportService {
  const { sql, clock, audit } = deps
  const credentialsAad = (tenantId: string, id: string) => `kms:cloud-connection:v1:${tenantId}:${id}`
  const allowedOrigins = new Set(deps.customEndpoints)

  /** The first URL of `fields` that is neither the provider's own host nor an origin the operator allowed. */
  function refusedEndpoint(
    adapter: CloudProviderAdapter,
    part: 'settings' | 'credentials' | 'target',
    fields: Record<string, unknown>,
  ): EndpointField | undefined {
    return adapter
      .endpoints(part, fields)
      .find((endpoint) => !endpoint.official && !allowedOrigins.has(originOf(endpoint.url)))
  }

  /**
   * A caller's custom endpoint the operator did not allow: a 400 naming the field. The URL is not
   * repeated (some sit among the credentials).
   */
  function requireAllowedEndpoints(
    adapter: CloudProviderAdapter,
    part: 'settings' | 'credentials' | 'target',
    fields: Record<string, unknown>,
  ): void {
    const refused = refusedEndpoint(adapter, part, fields)
    if (refused)
      throw invalidField(
        `body/${refused.field}`,
        `is not one of ${adapter.provider}'s own hosts, and the operator has not allowed this origin as a custom endpoint (KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS)`,
      )
  }

  /**
   * What is stored is checked again before anything is sent: an origin the operator removed from
   * the list (or a connection saved before the list existed) stops reaching that endpoint.
   */
  function requireStoredEndpointsAllowed(
    adapter: CloudProviderAdapter,
    context: ConnectionContext,
    target?: Record<string, unknown>,
  ): void {
    const parts = [
      ['settings', context.settings],
      ['credentials', context.credentials],
      ...(target ? [['target', target] as const] : []),
    ] as const
    for (const [part, fields] of parts) {
      const refused = refusedEndpoint(adapter, part, fields)
      if (refused)
        throw new CloudProviderError(
          'cloud_endpoint_not_allowed',
          `${refused.field} is a custom endpoint the operator does not allow (KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS)`,
          false,
        )
    }
  }

  const adapterOf = (provider: CloudProvider): CloudProviderAdapter => {
    const adapter = deps.adapters[provider]
    if (!adapter) throw new AppError(400, 'provider_unavailable', `The provider ${provider} is not available`)
    return adapter
  }

  /** A provider's validation error as the API's 400 naming the body field. */
  function fieldsChecked<T>(parse: () => T): T {
    try {
      return parse()
    } catch (err) {
      if (err instanceof CloudFieldError)
        throw invalidField(`body/${err.field}`, err.message.slice(err.field.length + 1))
      throw err
    }
  }

  /** The settings every provider shares: an extra CA for an endpoint with a private CA. */
  function commonSettings(settings: Record<string, unknown>): { caCertificate?: string } {
    const ca = settings['caCertificate']
    if (ca === undefined) return {}
    if (typeof ca !== 'string' || ca.length > MAX_CA_PEM)
      throw invalidField(
        'body/settings.caCertificate',
        `must be a PEM certificate of at most ${MAX_CA_PEM} characters`,
      )
    try {
      new X509Certificate(ca)
    } catch {
      throw invalidField('body/settings.caCertificate', 'must be a PEM certificate')
    }
    return { caCertificate: ca }
  }

  function parseSettings(adapter: CloudProviderAdapter, settings: Record<string, unknown>) {
    const { caCertificate, ...rest } = settings
    const common = commonSettings({ caCertificate })
    return { ...fieldsChecked(() => adapter.parseSettings(rest)), ...common }
  }

  async function sealCredentials(
    tenantId: string,
    id: string,
    credentials: Record<string, unknown>,
    db?: Queryable,
  ) {
    const plain = Buffer.from(JSON.stringify(credentials), 'utf8')
    try {
      return await deps.tenantKeks.seal(tenantId, plain, credentialsAad(tenantId, id), db)
    } finally {
      plain.fill(0)
    }
  }

  async function contextOf(row: ConnectionRow, deadline: AbortSignal): Promise<ConnectionContext> {
    const plain = await deps.tenantKeks.open(
      row.tenant_id,
      row.credentials_sealed,
      credentialsAad(row.tenant_id, row.id),
    )
    let credentials: Record<string, unknown>
    try {
      credentials = JSON.parse(plain.toString('utf8')) as Record<string, unknown>
    } finally {
      plain.fill(0)
    }
    const ca = row.settings['caCertificate']
    const outbound = typeof ca === 'string' ? deps.outbound.withExtraCa(ca) : deps.outbound
    return {
      settings: row.settings,
      credentials,
      outbound: boundedBy(outbound, deadline),
      timeoutMs: deps.timeoutMs,
    }
  }

  /**
   * An error as it may be stored and shown. Providers build their messages without secrets; the
   * credential values are struck out all the same, should one ever slip into a message.
   */
  function describeFailure(err: unknown, context: ConnectionContext | undefined) {
    const known = err instanceof CloudProviderError
    let message = known ? err.message : 'The push failed for an unexpected reason'
    for (const value of Object.values(context?.credentials ?? {}))
      if (typeof value === 'string' && value.length >= 4) message = message.split(value).join('[redacted]')
    return {
      code: known ? err.code : 'cloud_sync_failed',
      message: clipText(message, 500),
      retryable: known ? err.retryable : true,
    }
  }

  async function connectionOf(actor: Actor, id: string, db: Queryable = sql): Promise<ConnectionRow> {
    const row = isUuid(id) ? await getConnection(db, actor.tenantId, id) : undefined
    if (!row) throw notFound('connection_not_found', 'Cloud connection')
    return row
  }

  /** The key id a path's reference names (an alias resolved; an API key's restriction applied). */
  const keyIdOf = async (actor: Actor, ref: string) => (await resolveKeyRef(sql, actor, ref)).id

  async function keyOf(actor: Actor, keyId: string) {
    const key = isUuid(keyId) ? await deps.keys.describe(actor.tenantId, keyId) : undefined
    if (!key) throw notFound('key_not_found', 'Key')
    return key
  }

  async function exportOf(actor: Actor, keyId: string, id: string): Promise<ExportRow> {
    await keyOf(actor, keyId)
    const row = isUuid(id) ? await getExport(sql, actor.tenantId, keyId, id) : undefined
    if (!row) throw notFound('cloud_export_not_found', 'Cloud export')
    return row
  }

  /** The audit record of one push of `row.desired_version`, in the transaction that records it. */
  function recordSync(
    tx: Queryable,
    row: ExportRow,
    outcome: 'success' | 'failure',
    details: Record<string, string | boolean>,
  ) {
    return audit.recordInTransaction(tx, {
      tenantId: row.tenant_id,
      actor: 'system:cloud-export',
      action: 'keys.cloud_export.sync',
      resource: `key:${row.key_id}`,
      keyVersion: row.desired_version,
      outcome,
      details: { exportId: row.id, provider: row.provider, attempt: row.attempts, ...details },
    })
  }

  /** One claimed export: push outside any transaction, then record the outcome under the lease. */
  async function pushOne(row: ExportRow): Promise<boolean> {
    const leaseUntil = row.lease_until!
    const version = row.desired_version
    let context: ConnectionContext | undefined
    try {
      const connection = await getConnection(sql, row.tenant_id, row.connection_id)
      if (!connection)
        throw new CloudProviderError('connection_not_found', 'The connection was removed', false)
      const key = await deps.keys.describe(row.tenant_id, row.key_id)
      if (!key || !EXPORTABLE_STATES.includes(key.state))
        throw new CloudProviderError(
          'key_not_exportable',
          `The key is ${key?.state ?? 'gone'}: it is not pushed`,
          false,
        )
      // Every push, not only the export's creation: an export made before the check existed (or
      // a rotation's re-export of one) stops here, before any material is opened.
      if (!key.exportable) throw new CloudProviderError('key_not_exportable', NOT_EXPORTABLE, false)
      const deadline = AbortSignal.timeout(PUSH_DEADLINE_MS)
      context = await contextOf(connection, deadline)
      const adapter = adapterOf(row.provider)
      requireStoredEndpointsAllowed(adapter, context, row.target)
      const material = await deps.keys.material(row.tenant_id, row.key_id, version)
      if (!material)
        throw new CloudProviderError('key_not_exportable', `Version ${version} has no material`, false)
      const previous =
        row.provider_key_id && row.provider_state
          ? { providerKeyId: row.provider_key_id, state: row.provider_state }
          : null
      const result = await beforeDeadline(
        adapter.push(
          context,
          row.target,
          { algorithm: key.algorithm, keyType: key.keyType, keyId: row.key_id, version, ...material },
          previous,
        ),
        deadline,
      )
      const now = clock.now()
      const recorded = await sql.begin(async (tx) => {
        const updated = await recordSuccess(tx, {
          id: row.id,
          leaseUntil,
          version,
          now,
          providerKeyId: result.providerKeyId,
          providerState: result.state,
        })
        if (updated)
          await recordSync(tx, row, 'success', { providerKeyId: clipText(result.providerKeyId, 500) })
        return updated
      })
      return recorded !== undefined
    } catch (err) {
      const failure = describeFailure(err, context)
      if (!(err instanceof CloudProviderError))
        deps.logger?.warn(
          { exportId: row.id, err: { name: (err as Error)?.name ?? 'Error' } },
          'cloud export: unexpected push failure',
        )
      const retry = failure.retryable && row.attempts < MAX_SYNC_ATTEMPTS
      const retryAt = retry ? new Date(clock.now().getTime() + SYNC_BACKOFF_MS[row.attempts - 1]!) : null
      await sql.begin(async (tx) => {
        const updated = await recordFailure(tx, {
          id: row.id,
          leaseUntil,
          code: failure.code,
          message: failure.message,
          retryAt,
        })
        if (updated) await recordSync(tx, row, 'failure', { error: failure.code, willRetry: retry })
      })
      return false
    }
  }

  return {
    async createConnection(actor, input) {
      const adapter = adapterOf(input.provider)
      const settings = parseSettings(adapter, input.settings)
      const credentials = fieldsChecked(() => adapter.parseCredentials(input.credentials))
      requireAllowedEndpoints(adapter, 'settings', settings)
      requireAllowedEndpoints(adapter, 'credentials', credentials)
      const id = randomUUID()
      const now = clock.now()
      try {
        const row = await sql.begin(async (tx) => {
          const created = await insertConnection(tx, {
            id,
            tenant_id: actor.tenantId,
            name: input.name,
            provider: input.provider,
            settings,
            credentials_sealed: await sealCredentials(actor.tenantId, id, credentials, tx),
            created_at: now,
            created_by: actor.actor,
            updated_at: now,
            credentials_updated_at: now,
          })
          await audit.recordInTransaction(tx, {
            ...actor,
            action: 'cloud_connections.create',
            resource: `cloud_connection:${id}`,
            outcome: 'success',
            details: { provider: input.provider, name: input.name },
          })
          return created
        })
        return toConnectionView(row)
      } catch (err) {
        if (isUniqueViolation(err, CONNECTION_NAME_CONSTRAINT))
          throw new AppError(409, 'connection_name_taken', 'A cloud connection with this name exists already')
        throw err
      }
    },
    async listConnections(actor) {
      const data = (await listConnections(sql, actor.tenantId)).map(toConnectionView)
      return { data, total: data.length }
    },
    async getConnection(actor, id) {
      return toConnectionView(await connectionOf(actor, id))
    },
    async rotateCredentials(actor, id, input) {
      const current = await connectionOf(actor, id)
      const adapter = adapterOf(current.provider)
      const credentials = fieldsChecked(() => adapter.parseCredentials(input))
      requireAllowedEndpoints(adapter, 'credentials', credentials)
      const sealed = await sealCredentials(actor.tenantId, id, credentials)
      const row = await sql.begin(async (tx) => {
        const updated = await replaceCredentials(tx, actor.tenantId, id, sealed, clock.now())
        if (!updated) throw notFound('connection_not_found', 'Cloud connection')
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'cloud_connections.rotate_credentials',
          resource: `cloud_connection:${id}`,
          outcome: 'success',
          details: { provider: updated.provider },
        })
        return updated
      })
      return toConnectionView(row)
    },
    async deleteConnection(actor, id) {
      if (!isUuid(id)) throw notFound('connection_not_found', 'Cloud connection')
      await sql.begin(async (tx) => {
        const row = await lockConnection(tx, actor.tenantId, id)
        if (!row) throw notFound('connection_not_found', 'Cloud connection')
        const used = await countExportsOfConnection(tx, id)
        if (used > 0)
          throw new AppError(
            409,
            'connection_in_use',
            `${used} export(s) use this connection: delete them first`,
            {
              exports: used,
            },
          )
        await deleteConnection(tx, actor.tenantId, id)
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'cloud_connections.delete',
          resource: `cloud_connection:${id}`,
          outcome: 'success',
          details: { provider: row.provider },
        })
      })
    },
    async testConnection(actor, id) {
      const row = await connectionOf(actor, id)
      let context: ConnectionContext | undefined
      let result: ConnectionTestResult
      try {
        const deadline = AbortSignal.timeout(TEST_DEADLINE_MS)
        context = await contextOf(row, deadline)
        const adapter = adapterOf(row.provider)
        requireStoredEndpointsAllowed(adapter, context)
        await beforeDeadline(adapter.testConnection(context), deadline)
        result = { status: 'ok', error: null }
      } catch (err) {
        const failure = describeFailure(err, context)
        result = { status: 'failed', error: { code: failure.code, message: failure.message } }
      }
      await audit.record({
        ...actor,
        action: 'cloud_connections.test',
        resource: `cloud_connection:${id}`,
        outcome: result.status === 'ok' ? 'success' : 'failure',
        details: { provider: row.provider, ...(result.error ? { error: result.error.code } : {}) },
      })
      return result
    },
    async createExport(actor, ref, input) {
      const keyId = await keyIdOf(actor, ref)
      const key = await keyOf(actor, keyId)
      // First: a key not created exportable never leaves, whatever else the request says. The
      // attempt is audited at warning level, as a refused export-private is.
      if (!key.exportable) {
        await audit.record({
          ...actor,
          action: 'keys.cloud_export.create',
          resource: `key:${keyId}`,
          outcome: 'failure',
          details: {
            level: 'warning',
            reason: 'key_not_exportable',
            ...(isUuid(input.connectionId) ? { connectionId: input.connectionId } : {}),
          },
        })
        throw notExportable()
      }
      const connection = await connectionOf(actor, input.connectionId)
      const adapter = adapterOf(connection.provider)
      if (!adapter.supportedAlgorithms.includes(key.algorithm))
        throw new AppError(
          400,
          'algorithm_not_supported',
          `${connection.provider} takes ${adapter.supportedAlgorithms.join(', ')}; the key is ${key.algorithm}` +
            (key.keyType === 'HMAC' || /^(ML-|SLH-)/.test(key.algorithm)
              ? ' (post-quantum and HMAC keys are never exported to a cloud KMS)'
              : ''),
          {
            provider: connection.provider,
            algorithm: key.algorithm,
            supportedAlgorithms: adapter.supportedAlgorithms,
          },
        )
      requireState(key.state, ['Active'], 'export to a cloud KMS')
      const target = fieldsChecked(() => adapter.parseTarget(input.target))
      requireAllowedEndpoints(adapter, 'target', target)
      const now = clock.now()
      const id = randomUUID()
      const row = await sql.begin(async (tx) => {
        const created = await insertExport(tx, {
          id,
          tenant_id: actor.tenantId,
          key_id: keyId,
          connection_id: connection.id,
          provider: connection.provider,
          target,
          created_at: now,
          created_by: actor.actor,
          desired_version: key.currentVersion,
          next_attempt_at: now,
        })
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'keys.cloud_export.create',
          resource: `key:${keyId}`,
          keyVersion: key.currentVersion,
          outcome: 'success',
          details: { exportId: id, provider: connection.provider, connectionId: connection.id },
        })
        return created
      })
      return toExportView(row)
    },
    async listExports(actor, ref) {
      const keyId = await keyIdOf(actor, ref)
      await keyOf(actor, keyId)
      const data = (await listExports(sql, actor.tenantId, keyId)).map(toExportView)
      return { data, total: data.length }
    },
    async getExport(actor, ref, id) {
      const keyId = await keyIdOf(actor, ref)
      return toExportView(await exportOf(actor, keyId, id))
    },
    async deleteExport(actor, ref, id) {
      const keyId = await keyIdOf(actor, ref)
      await exportOf(actor, keyId, id)
      await sql.begin(async (tx) => {
        if (!(await deleteExport(tx, actor.tenantId, keyId, id)))
          throw notFound('cloud_export_not_found', 'Cloud export')
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'keys.cloud_export.delete',
          resource: `key:${keyId}`,
          outcome: 'success',
          details: { exportId: id },
        })
      })
    },
    async requestSync(actor, ref, id) {
      const keyId = await keyIdOf(actor, ref)
      const current = await exportOf(actor, keyId, id)
      const key = await keyOf(actor, keyId)
      if (!key.exportable) {
        // An export made before the check existed: it stops, with the reason on it and audited.
        await sql.begin(async (tx) => {
          await stopExports(
            tx,
            { tenantId: actor.tenantId, keyId, exportId: current.id },
            'key_not_exportable',
            NOT_EXPORTABLE,
          )
          await audit.recordInTransaction(tx, {
            ...actor,
            action: 'keys.cloud_export.sync_request',
            resource: `key:${keyId}`,
            outcome: 'failure',
            details: { exportId: current.id, level: 'warning', reason: 'key_not_exportable' },
          })
        })
        throw notExportable()
      }
      requireState(key.state, EXPORTABLE_STATES, 'sync to a cloud KMS')
      const row = await sql.begin(async (tx) => {
        const [updated] = await requestSync(
          tx,
          { tenantId: actor.tenantId, keyId, exportId: current.id },
          key.currentVersion,
          clock.now(),
        )
        if (!updated) throw notFound('cloud_export_not_found', 'Cloud export')
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'keys.cloud_export.sync_request',
          resource: `key:${keyId}`,
          keyVersion: key.currentVersion,
          outcome: 'success',
          details: { exportId: id },
        })
        return updated
      })
      return toExportView(row)
    },
    async keyVersionAdded(tx, event) {
      await requestSync(tx, { tenantId: event.tenantId, keyId: event.keyId }, event.version, event.now)
    },
    async syncDue() {
      const now = clock.now()
      const claimed = await claimDue(sql, now, new Date(now.getTime() + LEASE_MS), CLAIM_BATCH)
      // A pool, not batches in lockstep: one slow cloud holds one worker, not the others.
      const queue = [...claimed]
      let succeeded = 0
      const worker = async () => {
        for (let row = queue.shift(); row; row = queue.shift()) if (await pushOne(row)) succeeded++
      }
      await Promise.all(Array.from({ length: Math.min(PUSH_CONCURRENCY, queue.length) }, worker))
      return { attempted: claimed.length, succeeded, failed: claimed.length - succeeded }
    },
  }
}

const toConnectionView = (row: ConnectionRow): ConnectionView => ({
  id: row.id,
  name: row.name,
  provider: row.provider,
  settings: row.settings,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
  credentialsUpdatedAt: row.credentials_updated_at.toISOString(),
})

const toExportView = (row: ExportRow): ExportView => ({
  id: row.id,
  keyId: row.key_id,
  connectionId: row.connection_id,
  provider: row.provider,
  target: row.target,
  syncStatus: row.sync_status,
  desiredVersion: row.desired_version,
  attempts: row.attempts,
  nextAttemptAt: row.next_attempt_at?.toISOString() ?? null,
  lastAttemptAt: row.last_attempt_at?.toISOString() ?? null,
  lastSyncAt: row.last_sync_at?.toISOString() ?? null,
  lastSyncVersion: row.last_sync_version,
  lastSyncError:
    row.last_sync_error_code && row.last_sync_error
      ? { code: row.last_sync_error_code, message: row.last_sync_error }
      : null,
  providerKeyId: row.provider_key_id,
  createdAt: row.created_at.toISOString(),
})

/** Every request of `outbound` also ends when `deadline` does (the push's or the test's whole time). */
function boundedBy(outbound: OutboundClient, deadline: AbortSignal): OutboundClient {
  return {
    request: (request) =>
      outbound.request({
        ...request,
        signal: request.signal ? AbortSignal.any([request.signal, deadline]) : deadline,
      }),
    check: (url) => outbound.check(url),
    withAllowed: (extra) => boundedBy(outbound.withAllowed(extra), deadline),
    withExtraCa: (pem) => boundedBy(outbound.withExtraCa(pem), deadline),
  }
}

/** The work, or a retryable `cloud_push_timeout` once the deadline passes (waits between polls included). */
function beforeDeadline<T>(work: Promise<T>, deadline: AbortSignal): Promise<T> {
  if (deadline.aborted) return Promise.reject(timedOut())
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(timedOut())
    deadline.addEventListener('abort', onAbort, { once: true })
    work.then(
      (value) => {
        deadline.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error: unknown) => {
        deadline.removeEventListener('abort', onAbort)
        reject(error)
      },
    )
  })
}

const timedOut = () =>
  new CloudProviderError(
    'cloud_push_timeout',
    'The cloud did not finish in the time a push or test has',
    true,
  )
