import { type AlgorithmName, algorithmByName, type KeyType } from '../keys/algorithms.ts'
import type { KeyState } from '../keys/key-state.ts'

/** Thresholds of the findings (docs/insights.md). */
export const INSIGHT_THRESHOLDS = {
  /** An operation attempted on an expired key within this window makes it "still in use". */
  expiredInUseWindowDays: 30,
  /** A key expiring within this many days is flagged. */
  expiryWarningDays: 30,
  /** A rotation policy paused longer than this is flagged. */
  pausedTooLongDays: 30,
  /** A key with no operation for this many days (and older than that) is unused. */
  unusedDays: 90,
} as const

const DAY_MS = 24 * 60 * 60_000

export type Severity = 'critical' | 'warning' | 'info'

export interface InsightKey {
  id: string
  name: string
  keyType: KeyType
  algorithm: AlgorithmName
  description: string
  labels: readonly string[]
  state: KeyState
  createdAt: Date
  expiresAt: Date | null
}

export interface InsightInputs {
  keys: readonly InsightKey[]
  /** Each key's last operation attempt (any outcome), from the key-use meter. */
  lastAttemptOf(keyId: string): Date | undefined
  /** The key's rotation policy: undefined without one; pausedAt null while it runs. */
  policyOf(keyId: string): { pausedAt: Date | null } | undefined
  now: Date
}

export interface Finding {
  code:
    | 'expired_key_in_use'
    | 'weak_algorithm'
    | 'no_rotation_policy'
    | 'expiring_soon'
    | 'rotation_paused_too_long'
    | 'unused_key'
    | 'post_quantum_candidate'
    | 'untagged_key'
    | 'duplicate_purpose'
  severity: Severity
  title: string
  count: number
  keys: Array<{ id: string; name: string }>
  recommendation: string
  /** The standard or rule the finding rests on. */
  reference: string | null
}

/**
 * Weak algorithms of this service's set. RSA-2048 gives 112-bit security: BSI TR-02102-1 (2024)
 * asks for RSA moduli of at least 3000 bits for use after 2023, and NIST SP 800-131A Rev. 2
 * accepts 112 bits only through 2030. Every other algorithm offered is at least 128-bit.
 */
const WEAK: Partial<Record<AlgorithmName, string>> = {
  'RSA-2048':
    'BSI TR-02102-1 (2024): RSA moduli of at least 3000 bits for use after 2023; NIST SP 800-131A Rev. 2: 112-bit security (RSA-2048) acceptable only through 2030',
}

/** The post-quantum counterpart this service offers for a classical key of a type. */
const PQ_COUNTERPART: Partial<Record<KeyType, string>> = { Encryption: 'ML-KEM-768', Signing: 'ML-DSA-65' }

/** Name and description words too common to say two keys share a purpose. */
const GENERIC_WORDS = new Set(
  'key keys the and for with from prod production live stage staging dev development test qa new old main primary secondary default temp tmp service app api v1 v2 v3'.split(
    ' ',
  ),
)

/** Significant words of a name or description: split on non-letters and camelCase, lower-cased. */
export function purposeWords(text: string): Set<string> {
  const words = text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
  return new Set(words.filter((w) => w.length >= 3 && !/^\d+$/.test(w) && !GENERIC_WORDS.has(w)))
}

const entry = (key: InsightKey) => ({ id: key.id, name: key.name })
const byName = (a: { name: string; id: string }, b: { name: string; id: string }) =>
  a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0

/**
 * The tenant's findings (docs/insights.md), each with its keys and a recommendation; only
 * findings that hold for at least one key. Pure: the service gathers the inputs.
 */
export function findInsights(inputs: InsightInputs): Finding[] {
  const { now } = inputs
  const days = (n: number) => n * DAY_MS
  const active = inputs.keys.filter((k) => k.state === 'Active')
  const findings: Finding[] = []
  const add = (finding: Omit<Finding, 'count' | 'keys'>, keys: InsightKey[]) => {
    if (keys.length === 0) return
    const listed = keys.map(entry).sort(byName)
    findings.push({ ...finding, count: listed.length, keys: listed })
  }

  add(
    {
      code: 'expired_key_in_use',
      severity: 'critical',
      title: 'Expired keys still in use',
      recommendation:
        'Find the callers still using these keys (the audit log names them), move them to an active key, and revoke the expired ones.',
      reference: `an operation attempted after expiry within the last ${INSIGHT_THRESHOLDS.expiredInUseWindowDays} days`,
    },
    inputs.keys.filter((k) => {
      if (k.state !== 'Expired' || !k.expiresAt) return false
      const last = inputs.lastAttemptOf(k.id)
      return (
        last !== undefined &&
        last > k.expiresAt &&
        now.getTime() - last.getTime() <= days(INSIGHT_THRESHOLDS.expiredInUseWindowDays)
      )
    }),
  )
  for (const [algorithm, reference] of Object.entries(WEAK) as Array<[AlgorithmName, string]>) {
    add(
      {
        code: 'weak_algorithm',
        severity: 'critical',
        title: `Weak algorithm: ${algorithm}`,
        recommendation:
          'Create a replacement key with RSA-3072 or larger (or a post-quantum algorithm), move its users over, then retire this key.',
        reference,
      },
      active.filter((k) => k.algorithm === algorithm),
    )
  }
  add(
    {
      code: 'no_rotation_policy',
      severity: 'critical',
      title: 'Keys without a rotation policy',
      recommendation:
        'Give each key a rotation policy (PUT /api/v1/keys/{keyId}/rotation-policy), for example Quarterly.',
      reference: 'every active key of this service can be rotated (a new version under the same id)',
    },
    active.filter((k) => !inputs.policyOf(k.id)),
  )
  add(
    {
      code: 'expiring_soon',
      severity: 'warning',
      title: `Keys expiring within ${INSIGHT_THRESHOLDS.expiryWarningDays} days`,
      recommendation: 'Extend the expiry (PATCH expiresAt) or prepare a replacement key before the date.',
      reference: null,
    },
    active.filter(
      (k) =>
        k.expiresAt !== null &&
        k.expiresAt.getTime() - now.getTime() <= days(INSIGHT_THRESHOLDS.expiryWarningDays),
    ),
  )
  add(
    {
      code: 'rotation_paused_too_long',
      severity: 'warning',
      title: `Rotation paused for more than ${INSIGHT_THRESHOLDS.pausedTooLongDays} days`,
      recommendation: 'Resume the rotation policy (POST …/rotation-policy/resume) or remove it on purpose.',
      reference: null,
    },
    active.filter((k) => {
      const pausedAt = inputs.policyOf(k.id)?.pausedAt
      return (
        pausedAt != null && now.getTime() - pausedAt.getTime() > days(INSIGHT_THRESHOLDS.pausedTooLongDays)
      )
    }),
  )
  add(
    {
      code: 'unused_key',
      severity: 'warning',
      title: `Keys unused for ${INSIGHT_THRESHOLDS.unusedDays} days or more`,
      recommendation: 'Confirm nobody needs them, then revoke them (or schedule their deletion).',
      reference: null,
    },
    active.filter((k) => {
      const since = inputs.lastAttemptOf(k.id) ?? k.createdAt
      return now.getTime() - since.getTime() >= days(INSIGHT_THRESHOLDS.unusedDays)
    }),
  )
  add(
    {
      code: 'post_quantum_candidate',
      severity: 'info',
      title: 'Post-quantum migration candidates',
      recommendation:
        'Plan a move to the post-quantum counterpart: ML-KEM-768 for encryption keys, ML-DSA-65 for signing keys.',
      reference: 'classical keys whose type has a post-quantum algorithm in this service',
    },
    active.filter(
      (k) => !algorithmByName(k.algorithm).isPostQuantum && PQ_COUNTERPART[k.keyType] !== undefined,
    ),
  )
  add(
    {
      code: 'untagged_key',
      severity: 'info',
      title: 'Keys without labels',
      recommendation: 'Label them (the tag suggestions propose labels: POST /api/v1/tag-suggestion-jobs).',
      reference: null,
    },
    active.filter((k) => k.labels.length === 0),
  )
  add(
    {
      code: 'duplicate_purpose',
      severity: 'info',
      title: 'Keys that seem to serve the same purpose',
      recommendation:
        'Keys of one type and algorithm sharing a purpose word or a label: keep one per purpose where you can, and label the others to tell them apart.',
      reference:
        'same type and algorithm, and a shared label or a shared significant word in the name or description',
    },
    duplicatePurpose(active),
  )
  return findings
}

/** Keys of one type and algorithm linked by a shared label or purpose word (groups of two or more). */
function duplicatePurpose(keys: readonly InsightKey[]): InsightKey[] {
  const groups = new Map<string, InsightKey[]>()
  for (const key of keys) {
    const group = `${key.keyType}|${key.algorithm}`
    groups.set(group, [...(groups.get(group) ?? []), key])
  }
  const found = new Set<InsightKey>()
  for (const group of groups.values()) {
    const marks = group.map(
      (k) => new Set([...purposeWords(`${k.name} ${k.description}`), ...k.labels.map((l) => `label:${l}`)]),
    )
    for (let i = 0; i < group.length; i++)
      for (let j = i + 1; j < group.length; j++)
        if ([...marks[i]!].some((mark) => marks[j]!.has(mark))) {
          found.add(group[i]!)
          found.add(group[j]!)
        }
  }
  return [...found]
}
