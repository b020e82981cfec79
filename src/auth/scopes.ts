import { type Static, Type } from 'typebox'

/**
 * Scopes of spec section 5, plus `encrypt:invoke` (DESIGN: a narrower scope for /encrypt and
 * /decrypt only), `apikeys:read|write` (this service's own API-key management, see
 * docs/decisions.md) and `keys:export` (private-key export, never implied by keys:write).
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

/** What a path under /api/v1 demands of the caller. */
export type Requirement =
  | { kind: 'public' }
  | { kind: 'authenticated' }
  /** Any one of these scopes suffices; an empty or unobtainable list refuses every key. */
  | { kind: 'scoped'; anyOf: readonly string[] }

interface Rule {
  pattern: RegExp
  /** Resource whose `:read` scope grants GET/HEAD and whose `:write` scope grants the other methods. */
  resource?: string
  /** For resources that have a single scope, whatever the method. */
  only?: Scope
  /** Exactly this scope, whatever the method (a scope that is neither a :read nor a :write). */
  exactly?: Scope
  /** Scopes that also satisfy the rule. */
  also?: readonly Scope[]
  kind?: 'public' | 'authenticated'
}

/**
 * The spec's section 5 table as data, in evaluation order (first match wins). Per-key data
 * operations sit under /keys but need encryption:write (DESIGN), so they come first.
 */
const RULES: readonly Rule[] = [
  { pattern: /^\/health$/, kind: 'public' },
  { pattern: /^\/openapi\.json$/, kind: 'public' },
  { pattern: /^\/keys\/[^/]+\/(data-key|wrap|unwrap|mac|mac\/verify)$/, only: 'encryption:write' },
  { pattern: /^\/(encrypt|decrypt)$/, only: 'encryption:write', also: ['encrypt:invoke'] },
  { pattern: /^\/(encrypt|decrypt)\/batch$/, only: 'encryption:write' },
  { pattern: /^\/(sign|verify|generate-data-key)$/, only: 'encryption:write' },
  // Private key material leaves the service: its own scope, which keys:write does not imply.
  { pattern: /^\/keys\/[^/]+\/export-private$/, exactly: 'keys:export' },
  { pattern: /^\/keys(\/|$)/, resource: 'keys' },
  // Rotation webhooks belong to keys: reading deliveries is keys:read, the secret keys:write.
  { pattern: /^\/webhooks(\/|$)/, resource: 'keys' },
  { pattern: /^\/(secrets|folders)(\/|$)/, resource: 'secrets' },
  { pattern: /^\/ssh\/(ca|certificates)(\/|$)/, resource: 'ssh' },
  { pattern: /^\/(certificates|cas)(\/|$)/, resource: 'certificates' },
  { pattern: /^\/applications(\/|$)/, resource: 'applications' },
  { pattern: /^\/endusers(\/|$)/, resource: 'endusers' },
  { pattern: /^\/roles(\/|$)/, resource: 'roles' },
  { pattern: /^\/audit(\/|$)/, only: 'audit:read' },
  { pattern: /^\/billing\/(subscription|usage)$/, only: 'billing:read' },
  { pattern: /^\/api-keys(\/|$)/, resource: 'apikeys' },
  { pattern: /^\/tenant$/, kind: 'authenticated' },
]

const READ_METHODS = new Set(['GET', 'HEAD'])

function ruleFor(path: string): Rule | undefined {
  return RULES.find((rule) => rule.pattern.test(path))
}

/**
 * `path` is relative to /api/v1. A path no rule names needs a valid key and nothing more:
 * such paths have no route, and the caller learns that only once authenticated.
 */
export function requirementFor(method: string, path: string): Requirement {
  const rule = ruleFor(path)
  if (!rule) return { kind: 'authenticated' }
  if (rule.kind) return { kind: rule.kind }
  if (rule.exactly) return { kind: 'scoped', anyOf: [rule.exactly] }
  const access = READ_METHODS.has(method) ? 'read' : 'write'
  if (rule.only) {
    const [resource, only] = rule.only.split(':') as [string, string]
    // `audit:read` grants reads only, `encryption:write` writes only: the other kind of method
    // needs a scope that does not exist, so every key is refused.
    if (only !== access) return { kind: 'scoped', anyOf: [`${resource}:${access}`] }
    return { kind: 'scoped', anyOf: [rule.only, ...(rule.also ?? [])] }
  }
  return { kind: 'scoped', anyOf: [`${rule.resource}:${access}`] }
}

/** True when an explicit rule covers the path: every registered route must have one. */
export function hasRule(path: string): boolean {
  return ruleFor(path) !== undefined
}
