import { type Static, Type } from 'typebox'
import { SCOPES, type Scope } from './scopes.ts'

/** Tenant roles of spec section 2.7, weakest first. */
export const TENANT_ROLES = ['tenant:viewer', 'tenant:developer', 'tenant:admin', 'tenant:owner'] as const
export const TenantRoleSchema = Type.Enum(TENANT_ROLES, { description: 'A team member’s role in a tenant' })
export type TenantRole = Static<typeof TenantRoleSchema>

export function isTenantRole(value: string): value is TenantRole {
  return (TENANT_ROLES as readonly string[]).includes(value)
}

/**
 * Role → scopes (docs/identity.md "The model"): a viewer reads everything but
 * the audit log; a developer also writes keys, secrets, applications and runs cryptography; an
 * admin holds every scope; an owner is an admin who can also manage billing, ownership and
 * deletion (which are role checks, not scopes). Private-key export (`keys:export`) is a scope
 * like any other: admins and owners hold it.
 */
const VIEWER: readonly Scope[] = SCOPES.filter((scope) => scope.endsWith(':read') && scope !== 'audit:read')
const DEVELOPER: readonly Scope[] = [
  ...VIEWER,
  'keys:write',
  'secrets:write',
  'encryption:write',
  'encrypt:invoke',
  'applications:write',
]
const ROLE_SCOPES: Record<TenantRole, ReadonlySet<Scope>> = {
  'tenant:viewer': new Set(VIEWER),
  'tenant:developer': new Set(DEVELOPER),
  'tenant:admin': new Set(SCOPES),
  'tenant:owner': new Set(SCOPES),
}

export function scopesOfRole(role: TenantRole): ReadonlySet<Scope> {
  return ROLE_SCOPES[role]
}
