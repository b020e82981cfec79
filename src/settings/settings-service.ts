import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import { checkLoginPanel, type LoginPanel } from '../branding/login-panel.ts'
import type { Sql } from '../data/database.ts'
import { AppError } from '../platform/errors.ts'
import {
  getBrandingDocument,
  getSecurityDocument,
  lockSecurityDocument,
  saveBrandingDocument,
  saveSecurityDocument,
} from './settings-store.ts'

const MFA_METHODS = ['totp', 'emailOtp', 'smsOtp'] as const
type MfaMethod = (typeof MFA_METHODS)[number]

export interface MfaMethodSetting {
  enabled: boolean
  required: boolean
}

export interface SecuritySettings {
  mfaMethods: Record<MfaMethod, MfaMethodSetting>
  passwordPolicy: {
    minLength: number
    requireUppercase: boolean
    requireLowercase: boolean
    requireDigit: boolean
    requireSymbol: boolean
  }
  sessionLifetimes: { accessTokenSeconds: number; refreshTokenSeconds: number; idleSignOutSeconds: number }
  apiKeyPolicy: { maxLifetimeDays: number | null }
}

/** Every group optional, every field of a group optional: what is given replaces, the rest stays. */
export type SecuritySettingsPatch = {
  mfaMethods?: { [M in MfaMethod]?: Partial<MfaMethodSetting> }
  passwordPolicy?: Partial<SecuritySettings['passwordPolicy']>
  sessionLifetimes?: Partial<SecuritySettings['sessionLifetimes']>
  apiKeyPolicy?: Partial<SecuritySettings['apiKeyPolicy']>
}

/**
 * Defaults for a new tenant (docs/settings.md). SMS OTP is off (spec 2.6); TOTP and e-mail OTP
 * may be used but are not required; access tokens live 15 minutes, sessions 14 days.
 */
const DEFAULT_SECURITY: SecuritySettings = {
  mfaMethods: {
    totp: { enabled: true, required: false },
    emailOtp: { enabled: true, required: false },
    smsOtp: { enabled: false, required: false },
  },
  passwordPolicy: {
    minLength: 12,
    requireUppercase: false,
    requireLowercase: false,
    requireDigit: false,
    requireSymbol: false,
  },
  sessionLifetimes: { accessTokenSeconds: 900, refreshTokenSeconds: 1_209_600, idleSignOutSeconds: 86_400 },
  apiKeyPolicy: { maxLifetimeDays: null },
}

type Document = Record<string, Record<string, unknown>>

/** Stored document over the defaults, group by group and field by field (unknown fields ignored). */
function resolve(stored: Record<string, unknown> | undefined): SecuritySettings {
  const doc = (stored ?? {}) as Document
  const mfa = (doc['mfaMethods'] ?? {}) as Record<string, Partial<MfaMethodSetting>>
  return {
    mfaMethods: Object.fromEntries(
      MFA_METHODS.map((m) => [m, { ...DEFAULT_SECURITY.mfaMethods[m], ...(mfa[m] ?? {}) }]),
    ) as SecuritySettings['mfaMethods'],
    passwordPolicy: { ...DEFAULT_SECURITY.passwordPolicy, ...(doc['passwordPolicy'] ?? {}) },
    sessionLifetimes: { ...DEFAULT_SECURITY.sessionLifetimes, ...(doc['sessionLifetimes'] ?? {}) },
    apiKeyPolicy: { ...DEFAULT_SECURITY.apiKeyPolicy, ...(doc['apiKeyPolicy'] ?? {}) },
  }
}

/** The patch applied to the stored document, and the field paths it changed. */
function apply(
  stored: Record<string, unknown>,
  patch: SecuritySettingsPatch,
): { doc: Document; changed: string[] } {
  const doc: Document = structuredClone(stored) as Document
  const changed: string[] = []
  const before = resolve(stored)
  for (const group of ['passwordPolicy', 'sessionLifetimes', 'apiKeyPolicy'] as const) {
    for (const [field, value] of Object.entries(patch[group] ?? {})) {
      doc[group] = { ...(doc[group] ?? {}), [field]: value }
      if ((before[group] as Record<string, unknown>)[field] !== value) changed.push(`${group}.${field}`)
    }
  }
  for (const [method, setting] of Object.entries(patch.mfaMethods ?? {})) {
    const current = ((doc['mfaMethods'] ?? {}) as Record<string, Record<string, unknown>>)[method] ?? {}
    doc['mfaMethods'] = { ...(doc['mfaMethods'] ?? {}), [method]: { ...current, ...setting } }
    for (const [field, value] of Object.entries(setting ?? {})) {
      if ((before.mfaMethods[method as MfaMethod] as unknown as Record<string, unknown>)[field] !== value) {
        changed.push(`mfaMethods.${method}.${field}`)
      }
    }
  }
  return { doc, changed }
}

/** Rules across fields, checked on the result: a method cannot be required and disabled. */
function check(settings: SecuritySettings): void {
  checkMfaMethods(settings.mfaMethods, 'body/mfaMethods')
}

/** A required method must be enabled (the tenant's, or an application's own set). */
export function checkMfaMethods(methods: SecuritySettings['mfaMethods'], field: string): void {
  for (const method of MFA_METHODS) {
    const { enabled, required } = methods[method]
    if (required && !enabled) {
      const path = `${field}/${method}/required`
      const message = `cannot be true while ${method} is not enabled`
      throw new AppError(400, 'validation_failed', `${path} ${message}`, { fields: [{ path, message }] })
    }
  }
}

export interface SettingsService {
  getSecurity(tenantId: string): Promise<SecuritySettings>
  /** Owners and admins (the route decides); audited `settings.security.update` with the changed fields. */
  updateSecurity(actor: Actor, patch: SecuritySettingsPatch): Promise<SecuritySettings>
  /** The tenant's login panel: the fallback of its applications' (empty: the service's defaults). */
  getBranding(tenantId: string): Promise<LoginPanel>
  /** Replaces it; audited `settings.branding.update` with the editor. */
  updateBranding(actor: Actor, branding: LoginPanel): Promise<LoginPanel>
}

export function createSettingsService(deps: { sql: Sql; audit: AuditLog }): SettingsService {
  return {
    async getSecurity(tenantId) {
      return resolve(await getSecurityDocument(deps.sql, tenantId))
    },
    async updateSecurity(actor, patch) {
      return deps.sql.begin(async (tx) => {
        const stored = await lockSecurityDocument(tx, actor.tenantId)
        const { doc, changed } = apply(stored, patch)
        const result = resolve(doc)
        check(result)
        await saveSecurityDocument(tx, actor.tenantId, doc, actor.actor)
        await deps.audit.recordInTransaction(tx, {
          ...actor,
          action: 'settings.security.update',
          resource: `settings:security:${actor.tenantId}`,
          outcome: 'success',
          details: { changed: changed.join(',') },
        })
        return result
      })
    },
    async getBranding(tenantId) {
      return ((await getBrandingDocument(deps.sql, tenantId)) ?? {}) as LoginPanel
    },
    async updateBranding(actor, branding) {
      const checked = checkLoginPanel(branding, 'body')
      await deps.sql.begin(async (tx) => {
        await saveBrandingDocument(tx, actor.tenantId, checked as Record<string, unknown>, actor.actor)
        await deps.audit.recordInTransaction(tx, {
          ...actor,
          action: 'settings.branding.update',
          resource: `settings:branding:${actor.tenantId}`,
          outcome: 'success',
          details: {
            image: checked.imageUrl !== undefined,
            locales: Object.keys(checked.translations ?? {}).join(','),
          },
        })
      })
      return checked
    },
  }
}
