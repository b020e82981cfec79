import type { ResourceUse } from '../audit/audit-feed.ts'

const KEY = 'key:'
/** Only a well-formed id is a key's: a malformed resource is skipped, never an error. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** The audit feed's consumer that is the key-use meter (its position is seeded by migration 0032). */
export const KEY_USE_FEED = { consumer: 'intelligence.key_use', actionPrefix: 'crypto.', resourcePrefix: KEY }

export interface KeyUse {
  tenant_id: string
  key_id: string
  attempted_at: Date
  succeeded_at: Date | null
}

/**
 * The key-use meter (docs/insights.md "Last use"): each key's latest attempt and latest success,
 * from the audit feed's uses of `key:<id>` resources by cryptographic operations. An operation
 * that was refused (an expired key) counts as an attempt, which is what "still in use after
 * expiry" needs.
 */
export function keyUsesOf(uses: readonly ResourceUse[]): KeyUse[] {
  const out: KeyUse[] = []
  for (const use of uses) {
    const keyId = use.resource.slice(KEY.length)
    if (!use.resource.startsWith(KEY) || !UUID.test(keyId)) continue
    out.push({
      tenant_id: use.tenantId,
      key_id: keyId,
      attempted_at: use.lastAttemptAt,
      succeeded_at: use.lastSuccessAt,
    })
  }
  return out
}
