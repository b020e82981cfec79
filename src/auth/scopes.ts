import { type Static, Type } from 'typebox'

/**
 * Scopes of spec section 5, plus `encrypt:invoke` (DESIGN: a narrower scope for /encrypt and
 * /decrypt only), `apikeys:read|write` (this service's own API-key management, see
 * docs/decisions.md), `keys:export` (private-key export, never implied by keys:write) and
 * `policies:read|write` (access policies and access requests, docs/identity.md).
 */
export const SCOPES = [
  'secrets:read',
  'secrets:write',
  'keys:read',
  'keys:write',
  'keys:export',
  'encryption:write',
  'encrypt:invoke',
  'ssh:read',
  'ssh:write',
  'certificates:read',
  'certificates:write',
  'applications:read',
  'applications:write',
  'endusers:read',
  'endusers:write',
  'roles:read',
  'roles:write',
  'policies:read',
  'policies:write',
  'audit:read',
  'billing:read',
  'apikeys:read',
  'apikeys:write',
] as const

export const ScopeSchema = Type.Enum(SCOPES, { description: 'An API key scope (spec section 5)' })
export type Scope = Static<typeof ScopeSchema>

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value)
}
