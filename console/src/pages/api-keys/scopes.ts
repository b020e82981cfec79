import type { Schemas } from '../../api/client.ts'

export type Scope = Schemas['CreateApiKeyRequest']['scopes'][number]

interface ScopeGroup {
  area: string
  scopes: ReadonlyArray<{ scope: Scope; allows: string }>
}

/**
 * Every scope an API key can hold (src/auth/scopes.ts), by area, with what it allows
 * (docs/keys.md, crypto-operations.md, secrets.md, identity.md, decisions.md).
 */
export const SCOPE_GROUPS: readonly ScopeGroup[] = [
  {
    area: 'Keys',
    scopes: [
      { scope: 'keys:read', allows: 'List keys, read their details, versions and public keys' },
      { scope: 'keys:write', allows: 'Create, import, rotate, change, disable and delete keys' },
      { scope: 'keys:export', allows: 'Export private key material (never implied by keys:write)' },
    ],
  },
  {
    area: 'Encryption',
    scopes: [
      {
        scope: 'encryption:write',
        allows: 'Every cryptographic operation: encrypt, decrypt, sign, verify, MAC, data keys, wrap',
      },
      { scope: 'encrypt:invoke', allows: 'Only encrypt and decrypt (narrower than encryption:write)' },
    ],
  },
  {
    area: 'Secrets',
    scopes: [
      { scope: 'secrets:read', allows: 'List secrets and folders and read secret values' },
      { scope: 'secrets:write', allows: 'Create, change, move and delete secrets and folders' },
    ],
  },
  {
    area: 'Applications and sign-in',
    scopes: [
      { scope: 'applications:read', allows: 'Read applications and SAML identity providers' },
      { scope: 'applications:write', allows: 'Register, change and delete applications, rotate secrets' },
      { scope: 'endusers:read', allows: "List and read the applications' end-users" },
      { scope: 'endusers:write', allows: 'Create, change, block and delete end-users' },
      { scope: 'roles:read', allows: "Read applications' roles and who holds them" },
      { scope: 'roles:write', allows: 'Create, change and delete roles; assign them to end-users' },
      { scope: 'policies:read', allows: 'Read access policies and access requests' },
      { scope: 'policies:write', allows: 'Create, change and delete access policies' },
    ],
  },
  {
    area: 'SSH and certificates',
    scopes: [
      { scope: 'ssh:read', allows: 'Reserved for SSH operations (no route uses it yet)' },
      { scope: 'ssh:write', allows: 'Reserved for SSH operations (no route uses it yet)' },
      { scope: 'certificates:read', allows: 'Reserved for certificates (no route uses it yet)' },
      { scope: 'certificates:write', allows: 'Reserved for certificates (no route uses it yet)' },
    ],
  },
  {
    area: 'Administration',
    scopes: [
      { scope: 'audit:read', allows: "Read the tenant's audit log" },
      { scope: 'billing:read', allows: 'Read the plan, usage and invoices' },
      { scope: 'apikeys:read', allows: 'List API keys (never their secrets)' },
      { scope: 'apikeys:write', allows: 'Create API keys with its own scopes at most, and revoke keys' },
    ],
  },
]

export const ALL_SCOPES: readonly Scope[] = SCOPE_GROUPS.flatMap((group) => group.scopes.map((s) => s.scope))
