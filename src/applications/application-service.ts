import { randomBytes, randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import { checkLoginPanel, type LoginPanel } from '../branding/login-panel.ts'
import type { Queryable, Sql } from '../data/database.ts'
import type { AppCreator } from '../endusers/enduser-service.ts'
import { open, SealedBlobError, seal } from '../keyring/aead.ts'
import type { MasterKeyring } from '../keyring/master-key.ts'
import { type RewrapResult, rewrapEach } from '../keyring/rewrap.ts'
import { AppError, invalidField, notFound } from '../platform/errors.ts'
import { isUuid } from '../platform/ids.ts'
import { checkMfaMethods, type SecuritySettings } from '../settings/settings-service.ts'
import {
  type ApplicationRow,
  deleteApplication,
  getApplication,
  getApplicationByClientId,
  getApplicationById,
  insertApplication,
  listAllRedirectUris,
  listApplications,
  replaceSealedSecret,
  replaceSecret,
  secretsToRewrap,
  updateApplication,
} from './application-store.ts'

/**
 * Application types (docs/identity.md "Applications"): a single-page app and a native app are
 * public clients (no secret; PKCE); a traditional web app and a machine-to-machine client are
 * confidential (a secret, shown once). Machine-to-machine clients sign nobody in, so they have no
 * redirect URIs.
 */
export const APPLICATION_TYPES = ['spa', 'traditional', 'native', 'machine_to_machine'] as const
type ApplicationType = (typeof APPLICATION_TYPES)[number]
const CONFIDENTIAL_TYPES: readonly ApplicationType[] = ['traditional', 'machine_to_machine']

export const APPLICATION_LIMITS = { uris: 20, uriChars: 2048 } as const

type MfaMethods = SecuritySettings['mfaMethods']
interface ApplicationBranding {
  loginPanel: LoginPanel
}

interface ApplicationView {
  id: string
  name: string
  applicationType: ApplicationType
  clientId: string
  /** Confidential types: whether a secret exists (it is shown only when made). */
  hasClientSecret: boolean
  clientSecretRotatedAt: string | null
  redirectUris: string[]
  postLogoutRedirectUris: string[]
  resources: string[]
  /** The application's own MFA methods, replacing the tenant's in full; null: the tenant's apply. */
  mfaMethods: MfaMethods | null
  branding: ApplicationBranding | null
  /** People may create their own account on its sign-in pages (the account is confirmed by e-mail). */
  signUpEnabled: boolean
  createdAt: string
  updatedAt: string
}

interface ApplicationInput {
  name: string
  applicationType: ApplicationType
  /** Absent: none (what machine_to_machine has; every other type needs at least one). */
  redirectUris?: string[] | undefined
  postLogoutRedirectUris?: string[] | undefined
  resources?: string[] | undefined
  mfaMethods?: MfaMethods | null | undefined
  branding?: ApplicationBranding | null | undefined
  signUpEnabled?: boolean | undefined
}

/**
 * The view's fields a PUT cannot change. A PUT may carry them, as read (the GET answer put back
 * unchanged is a valid PUT); a different value is 409 read_only_field naming the field.
 */
const READ_ONLY_FIELDS = [
  'id',
  'applicationType',
  'clientId',
  'hasClientSecret',
  'clientSecretRotatedAt',
  'createdAt',
  'updatedAt',
] as const satisfies readonly (keyof ApplicationView)[]
type ReadOnlyField = (typeof READ_ONLY_FIELDS)[number]

/** PUT: the type never changes; `resources` left out keeps the stored ones, `[]` clears them. */
interface ApplicationChange extends Partial<Pick<ApplicationView, ReadOnlyField>> {
  name: string
  /** Replaces the stored list; absent: none (machine_to_machine only). */
  redirectUris?: string[] | undefined
  postLogoutRedirectUris?: string[] | undefined
  resources?: string[] | undefined
  /** Like resources: left out keeps the stored value; null clears it. */
  mfaMethods?: MfaMethods | null | undefined
  branding?: ApplicationBranding | null | undefined
  signUpEnabled?: boolean | undefined
}

const toView = (row: ApplicationRow): ApplicationView => ({
  id: row.id,
  name: row.name,
  applicationType: row.application_type,
  clientId: row.client_id,
  hasClientSecret: row.client_secret_sealed !== null,
  clientSecretRotatedAt: row.client_secret_rotated_at?.toISOString() ?? null,
  redirectUris: row.redirect_uris,
  postLogoutRedirectUris: row.post_logout_redirect_uris,
  resources: row.resources,
  mfaMethods: row.mfa_methods as MfaMethods | null,
  branding: row.branding as ApplicationBranding | null,
  signUpEnabled: row.sign_up_enabled,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
})

/** The service's own resource indicators (a tenant's API): no application may declare them. */
const RESERVED_RESOURCE_PREFIX = 'urn:kms:'

const CLIENT_ID = /^app_[A-Za-z0-9_-]{20}$/

/** The web origin of an http(s) URI; custom schemes (native apps) have none. */
function originOf(uri: string): string | undefined {
  try {
    const url = new URL(uri)
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : undefined
  } catch {
    return undefined
  }
}

const keptOrSet = (value: unknown) => (value === undefined ? 'kept' : value === null ? 'cleared' : 'replaced')

const FORBIDDEN_SCHEMES = new Set(['javascript:', 'data:', 'file:', 'vbscript:', 'blob:'])

/** Absolute, no fragment, bounded; web apps use http(s), native apps may use their own scheme. */
function checkUris(
  uris: readonly string[],
  field: string,
  type: ApplicationType,
  kind: 'redirect' | 'resource',
): string[] {
  if (new Set(uris).size !== uris.length) throw invalidField(field, 'must not repeat a URI')
  uris.forEach((uri, index) => {
    const path = `${field}/${index}`
    let url: URL
    try {
      url = new URL(uri)
    } catch {
      throw invalidField(path, 'must be an absolute URI')
    }
    if (uri.includes('#')) throw invalidField(path, 'must not have a fragment')
    if (FORBIDDEN_SCHEMES.has(url.protocol))
      throw invalidField(path, `must not use the ${url.protocol} scheme`)
    if (kind === 'resource' && uri.toLowerCase().startsWith(RESERVED_RESOURCE_PREFIX))
      throw invalidField(
        path,
        `must not start with ${RESERVED_RESOURCE_PREFIX} (the service's own resources)`,
      )
    if (kind === 'redirect' && type !== 'native' && url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw invalidField(path, 'must be an http or https URI (custom schemes are for native applications)')
    }
  })
  return [...uris]
}

function checkRedirects(
  type: ApplicationType,
  redirectUris: readonly string[],
  postLogout: readonly string[],
) {
  if (type === 'machine_to_machine') {
    if (redirectUris.length > 0)
      throw invalidField('body/redirectUris', 'must be empty for machine_to_machine (it signs nobody in)')
    if (postLogout.length > 0)
      throw invalidField('body/postLogoutRedirectUris', 'must be empty for machine_to_machine')
    return
  }
  if (redirectUris.length === 0)
    throw invalidField('body/redirectUris', `must list at least one URI for ${type}`)
  checkUris(redirectUris, 'body/redirectUris', type, 'redirect')
  checkUris(postLogout, 'body/postLogoutRedirectUris', type, 'redirect')
}

function checkSettings(input: { mfaMethods?: MfaMethods | null; branding?: ApplicationBranding | null }) {
  if (input.mfaMethods) checkMfaMethods(input.mfaMethods, 'body/mfaMethods')
  if (input.branding) checkLoginPanel(input.branding.loginPanel, 'body/branding/loginPanel')
}

const TIMESTAMP_FIELDS: ReadOnlyField[] = ['clientSecretRotatedAt', 'createdAt', 'updatedAt']

/**
 * 409 read_only_field when the PUT gives a read-only field another value than the stored one.
 * Timestamps compare as instants (`…00Z` and `…00.000Z` are the same). Compared with the row read
 * before the write, as a check of what the caller sent, not a lock.
 */
function checkReadOnly(change: ApplicationChange, stored: ApplicationView): void {
  const same = (field: ReadOnlyField) => {
    const given = change[field]
    const current = stored[field]
    if (given === undefined || given === current) return true
    if (!TIMESTAMP_FIELDS.includes(field) || typeof given !== 'string' || typeof current !== 'string')
      return false
    return new Date(given).getTime() === new Date(current).getTime()
  }
  const fields = READ_ONLY_FIELDS.filter((field) => !same(field)).map((field) => ({
    path: `body/${field}`,
    message: `is read-only: it is ${JSON.stringify(stored[field])}`,
  }))
  if (fields.length === 0) return
  throw new AppError(409, 'read_only_field', fields.map((f) => `${f.path} ${f.message}`).join('; '), {
    fields,
  })
}

function checkName(name: string): string {
  if (name.trim() !== name || name.length === 0)
    throw invalidField('body/name', 'must be 1 to 200 characters without surrounding spaces')
  return name
}

/**
 * An application as the OpenID provider sees it (read on every use, so a change applies at once
 * in every process). The secret is unsealed only for the provider's client authentication.
 */
interface RegisteredClient {
  applicationId: string
  tenantId: string
  clientId: string
  name: string
  applicationType: ApplicationType
  clientSecret: string | undefined
  redirectUris: string[]
  postLogoutRedirectUris: string[]
  resources: string[]
  mfaMethods: MfaMethods | null
  branding: ApplicationBranding | null
  signUpEnabled: boolean
}

/** What the end-users module does when a team member registers an application (src/endusers). */
export interface CreatorEnrolment {
  prepareAppCreator(actor: Actor): Promise<AppCreator | undefined>
  addAppCreator(tx: Queryable, actor: Actor, creator: AppCreator, applicationId: string): Promise<void>
}

export interface ApplicationService {
  list(
    actor: Actor,
    page: { limit: number; offset: number },
  ): Promise<{ data: ApplicationView[]; total: number }>
  get(actor: Actor, id: string): Promise<ApplicationView>
  /** A confidential application's secret comes back here once. */
  create(actor: Actor, input: ApplicationInput): Promise<ApplicationView & { clientSecret?: string }>
  update(actor: Actor, id: string, change: ApplicationChange): Promise<ApplicationView>
  /** A new secret (the old one stops working); 409 `public_client` for public types. */
  rotateSecret(actor: Actor, id: string): Promise<ApplicationView & { clientSecret: string }>
  remove(actor: Actor, id: string): Promise<void>
  /** The provider's view of a client, by its client_id (any tenant: the client id says which). */
  clientOf(clientId: string): Promise<RegisteredClient | undefined>
  applicationOf(applicationId: string): Promise<RegisteredClient | undefined>
  exists(tenantId: string, id: string): Promise<boolean>
  /** Origins of every redirect and post-logout redirect URI (the CORS allow-list), per tenant. */
  redirectOrigins(tenantId?: string): Promise<Map<string, Set<string>>>
  /** Master key rotation: every client secret is sealed again under the primary key. */
  rewrapSealed(keyring: MasterKeyring): Promise<RewrapResult>
}

/**
 * A confidential application whose secret cannot be opened (sealed by a master key this process
 * does not hold): it is refused, never taken for a public client, and the log says why.
 */
class ClientSecretUnavailableError extends Error {
  constructor(applicationId: string, masterKeyId: string | null) {
    super(
      `the client secret of application ${applicationId} does not open with master key ${masterKeyId}: give this process that key (KMS_MASTER_KEY_PREVIOUS or the key file) and run \`kms rotate-master-key\`, or rotate the application's secret`,
    )
  }
}

const secretAad = (id: string) => `kms application client secret v1 id:${id}`

/**
 * What the provider, the CORS lists and the modules that name an application read of the
 * applications: built before those modules (and before the service, which needs the end-users),
 * so the provider and the end-users need no service built after them.
 */
export type ApplicationDirectory = Pick<
  ApplicationService,
  'clientOf' | 'applicationOf' | 'exists' | 'redirectOrigins'
>

export function createApplicationDirectory(deps: {
  sql: Sql
  masterKeys: MasterKeyring
  /** Where a secret that cannot be opened is reported (the provider answers such a client with an error only). */
  logger?: Pick<Logger, 'error'>
}): ApplicationDirectory {
  const { sql } = deps
  const secretOf = (row: ApplicationRow): string | undefined => {
    if (!row.client_secret_sealed) return undefined
    const masterKey = row.client_secret_master_key_id
      ? deps.masterKeys.find(row.client_secret_master_key_id)
      : undefined
    try {
      if (masterKey) return open(masterKey.key, row.client_secret_sealed, secretAad(row.id)).toString('utf8')
    } catch (err) {
      if (!(err instanceof SealedBlobError)) throw err
    }
    const error = new ClientSecretUnavailableError(row.id, row.client_secret_master_key_id)
    deps.logger?.error({ applicationId: row.id, tenantId: row.tenant_id }, error.message)
    throw error
  }
  const registered = (row: ApplicationRow): RegisteredClient => {
    return {
      applicationId: row.id,
      tenantId: row.tenant_id,
      clientId: row.client_id,
      name: row.name,
      applicationType: row.application_type,
      clientSecret: secretOf(row),
      redirectUris: row.redirect_uris,
      postLogoutRedirectUris: row.post_logout_redirect_uris,
      resources: row.resources,
      mfaMethods: row.mfa_methods as MfaMethods | null,
      branding: row.branding as ApplicationBranding | null,
      signUpEnabled: row.sign_up_enabled,
    }
  }

  return {
    async clientOf(clientId) {
      if (!CLIENT_ID.test(clientId)) return undefined
      const row = await getApplicationByClientId(sql, clientId)
      return row ? registered(row) : undefined
    },
    async applicationOf(applicationId) {
      if (!isUuid(applicationId)) return undefined
      const row = await getApplicationById(sql, applicationId)
      return row ? registered(row) : undefined
    },
    async exists(tenantId, id) {
      return (await getApplication(sql, tenantId, id)) !== undefined
    },
    async redirectOrigins(tenantId) {
      const byTenant = new Map<string, Set<string>>()
      for (const row of await listAllRedirectUris(sql, tenantId)) {
        const origins = byTenant.get(row.tenant_id) ?? new Set<string>()
        for (const uri of [...row.redirect_uris, ...row.post_logout_redirect_uris]) {
          const origin = originOf(uri)
          if (origin) origins.add(origin)
        }
        byTenant.set(row.tenant_id, origins)
      }
      return byTenant
    },
  }
}

export function createApplicationService(deps: {
  sql: Sql
  audit: AuditLog
  masterKeys: MasterKeyring
  /** Where a secret that cannot be opened is reported (the provider answers such a client with an error only). */
  logger?: Pick<Logger, 'error'>
  /** The registering team member joins the application's end-user list (spec 4.4). */
  creators: CreatorEnrolment
  /** After commit of any change: caches built from applications (CORS) are dropped everywhere. */
  changed: (tenantId: string) => Promise<void>
  /** The provider's reads of applications (createApplicationDirectory). */
  directory: ApplicationDirectory
}): ApplicationService {
  const { sql, audit } = deps
  const newSecret = (id: string) => {
    const secret = `cs_${randomBytes(32).toString('base64url')}`
    const primary = deps.masterKeys.primary
    return {
      secret,
      sealed: seal(primary.key, Buffer.from(secret, 'utf8'), secretAad(id)),
      masterKeyId: primary.id,
    }
  }
  const missing = () => notFound('application_not_found', 'Application')
  return {
    async list(actor, page) {
      const { rows, total } = await listApplications(sql, actor.tenantId, page)
      return { data: rows.map(toView), total }
    },
    async get(actor, id) {
      const row = await getApplication(sql, actor.tenantId, id)
      if (!row) throw missing()
      return toView(row)
    },
    async create(actor, input) {
      const name = checkName(input.name)
      const redirectUris = input.redirectUris ?? []
      const postLogout = input.postLogoutRedirectUris ?? []
      checkRedirects(input.applicationType, redirectUris, postLogout)
      const resources = checkUris(input.resources ?? [], 'body/resources', input.applicationType, 'resource')
      checkSettings(input)
      const id = randomUUID()
      const confidential = CONFIDENTIAL_TYPES.includes(input.applicationType)
      const secret = confidential ? newSecret(id) : undefined
      const creator = await deps.creators.prepareAppCreator(actor)
      const row = await sql.begin(async (tx) => {
        const created = await insertApplication(tx, {
          id,
          tenant_id: actor.tenantId,
          name,
          application_type: input.applicationType,
          client_id: `app_${randomBytes(15).toString('base64url')}`,
          client_secret_sealed: secret?.sealed ?? null,
          client_secret_master_key_id: secret?.masterKeyId ?? null,
          redirect_uris: [...redirectUris],
          post_logout_redirect_uris: [...postLogout],
          resources,
          mfa_methods: input.mfaMethods ?? null,
          branding: input.branding ?? null,
          sign_up_enabled: input.signUpEnabled ?? false,
          created_by: actor.actor,
        })
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'applications.create',
          resource: `application:${id}`,
          outcome: 'success',
          details: { applicationType: input.applicationType, clientId: created.client_id },
        })
        // In the same transaction: an application never exists without its creator on its list.
        if (creator) await deps.creators.addAppCreator(tx, actor, creator, id)
        return created
      })
      await deps.changed(actor.tenantId)
      return { ...toView(row), ...(secret ? { clientSecret: secret.secret } : {}) }
    },
    async update(actor, id, change) {
      const current = await getApplication(sql, actor.tenantId, id)
      if (!current) throw missing()
      checkReadOnly(change, toView(current))
      const name = checkName(change.name)
      const redirectUris = change.redirectUris ?? []
      const postLogout = change.postLogoutRedirectUris ?? []
      checkRedirects(current.application_type, redirectUris, postLogout)
      const resources =
        change.resources === undefined
          ? undefined
          : checkUris(change.resources, 'body/resources', current.application_type, 'resource')
      checkSettings(change)
      const updated = await sql.begin(async (tx) => {
        const row = await updateApplication(tx, actor.tenantId, id, {
          name,
          redirectUris: [...redirectUris],
          postLogoutRedirectUris: [...postLogout],
          resources,
          mfaMethods: change.mfaMethods,
          branding: change.branding,
          signUpEnabled: change.signUpEnabled,
          by: actor.actor,
        })
        if (!row) throw missing()
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'applications.update',
          resource: `application:${id}`,
          outcome: 'success',
          details: {
            resources: resources === undefined ? 'kept' : resources.length === 0 ? 'cleared' : 'replaced',
            mfaMethods: keptOrSet(change.mfaMethods),
            branding: keptOrSet(change.branding),
            signUp:
              change.signUpEnabled === undefined ? 'kept' : change.signUpEnabled ? 'enabled' : 'disabled',
          },
        })
        return toView(row)
      })
      await deps.changed(actor.tenantId)
      return updated
    },
    async rotateSecret(actor, id) {
      const current = await getApplication(sql, actor.tenantId, id)
      if (!current) throw missing()
      if (!current.client_secret_sealed) {
        throw new AppError(
          409,
          'public_client',
          `A ${current.application_type} application has no secret: it uses PKCE`,
        )
      }
      const secret = newSecret(id)
      return sql.begin(async (tx) => {
        const row = await replaceSecret(tx, actor.tenantId, id, {
          sealed: secret.sealed,
          masterKeyId: secret.masterKeyId,
          by: actor.actor,
        })
        if (!row) throw missing()
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'applications.secret_rotate',
          resource: `application:${id}`,
          outcome: 'success',
        })
        return { ...toView(row), clientSecret: secret.secret }
      })
    },
    async remove(actor, id) {
      await sql.begin(async (tx) => {
        if (!(await deleteApplication(tx, actor.tenantId, id))) throw missing()
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'applications.delete',
          resource: `application:${id}`,
          outcome: 'success',
        })
      })
      await deps.changed(actor.tenantId)
    },
    clientOf: deps.directory.clientOf,
    applicationOf: deps.directory.applicationOf,
    exists: deps.directory.exists,
    redirectOrigins: deps.directory.redirectOrigins,
    rewrapSealed: (keyring) =>
      rewrapEach({
        keyring,
        batch: (primaryId, after, limit) => secretsToRewrap(sql, { primaryId, after, limit }),
        aad: (item) => secretAad(item.id),
        replace: (item, resealed, primary) =>
          replaceSealedSecret(sql, { id: item.id, from: item.sealed, to: resealed, masterKeyId: primary.id }),
      }),
  }
}
