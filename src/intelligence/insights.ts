import { ALGORITHM_NAMES, type AlgorithmName, algorithmByName, type KeyType } from '../keys/algorithms.ts'
import type { InsightCriteria, InsightRows, PurposeGroupRow } from './intelligence-store.ts'

/** Thresholds of the findings (docs/insights.md). */
const INSIGHT_THRESHOLDS = {
  /** An operation attempted on an expired key within this window makes it "still in use". */
  expiredInUseWindowDays: 30,
  /** A key expiring within this many days is flagged. */
  expiryWarningDays: 30,
  /** A rotation policy paused longer than this is flagged. */
  pausedTooLongDays: 30,
  /** A key with no operation for this many days (and older than that) is unused. */
  unusedDays: 90,
} as const

type Severity = 'critical' | 'warning' | 'info'

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
  /** duplicate_purpose only: the largest groups of keys sharing a label or a word. */
  groups?: PurposeGroup[]
}

/** Keys of one type and algorithm that share one label or one significant word. */
interface PurposeGroup {
  keyType: KeyType
  algorithm: AlgorithmName
  shared: { kind: 'label' | 'word'; value: string }
  count: number
  /** The group's first and last key by name (one group can hold thousands). */
  examples: Array<{ id: string; name: string }>
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

/**
 * Name and description words too common to say two keys share a purpose. A word counts when it
 * has 3+ characters and is not only digits (intelligence-store.ts splits the text: camelCase,
 * then anything but ASCII letters and digits, lower-cased).
 */
const GENERIC_WORDS = new Set(
  'key keys the and for with from prod production live stage staging dev development test qa new old main primary secondary default temp tmp service app api v1 v2 v3'.split(
    ' ',
  ),
)

/** At most this many keys are listed per finding (the first by name); `count` is the total. */
export const MAX_LISTED_KEYS = 100
/** At most this many duplicate-purpose groups are listed (the largest first). */
export const MAX_PURPOSE_GROUPS = 20

type Definition = Omit<Finding, 'count' | 'keys' | 'groups'>

/**
 * The findings in report order (docs/insights.md). Which keys each holds for is decided in SQL
 * (intelligence-store.ts, `keyFindings` and `tenantInsightQuery`), from the criteria below.
 */
const DEFINITIONS: ReadonlyArray<{ code: Finding['code']; define(variant: string | null): Definition }> = [
  {
    code: 'expired_key_in_use',
    define: () => ({
      code: 'expired_key_in_use',
      severity: 'critical',
      title: 'Expired keys still in use',
      recommendation:
        'Find the callers still using these keys (the audit log names them), move them to an active key, and revoke the expired ones.',
      reference: `an operation attempted after expiry within the last ${INSIGHT_THRESHOLDS.expiredInUseWindowDays} days`,
    }),
  },
  {
    code: 'weak_algorithm',
    define: (algorithm) => ({
      code: 'weak_algorithm',
      severity: 'critical',
      title: `Weak algorithm: ${algorithm}`,
      recommendation:
        'Create a replacement key with RSA-3072 or larger (or a post-quantum algorithm), move its users over, then retire this key.',
      reference: WEAK[algorithm as AlgorithmName] ?? null,
    }),
  },
  {
    code: 'no_rotation_policy',
    define: () => ({
      code: 'no_rotation_policy',
      severity: 'critical',
      title: 'Keys without a rotation policy',
      recommendation:
        'Give each key a rotation policy (PUT /api/v1/keys/{keyId}/rotation-policy), for example Quarterly.',
      reference: 'every active key of this service can be rotated (a new version under the same id)',
    }),
  },
  {
    code: 'expiring_soon',
    define: () => ({
      code: 'expiring_soon',
      severity: 'warning',
      title: `Keys expiring within ${INSIGHT_THRESHOLDS.expiryWarningDays} days`,
      recommendation: 'Extend the expiry (PATCH expiresAt) or prepare a replacement key before the date.',
      reference: null,
    }),
  },
  {
    code: 'rotation_paused_too_long',
    define: () => ({
      code: 'rotation_paused_too_long',
      severity: 'warning',
      title: `Rotation paused for more than ${INSIGHT_THRESHOLDS.pausedTooLongDays} days`,
      recommendation: 'Resume the rotation policy (POST …/rotation-policy/resume) or remove it on purpose.',
      reference: null,
    }),
  },
  {
    code: 'unused_key',
    define: () => ({
      code: 'unused_key',
      severity: 'warning',
      title: `Keys unused for ${INSIGHT_THRESHOLDS.unusedDays} days or more`,
      recommendation: 'Confirm nobody needs them, then revoke them (or schedule their deletion).',
      reference: null,
    }),
  },
  {
    code: 'post_quantum_candidate',
    define: () => ({
      code: 'post_quantum_candidate',
      severity: 'info',
      title: 'Post-quantum migration candidates',
      recommendation:
        'Plan a move to the post-quantum counterpart: ML-KEM-768 for encryption keys, ML-DSA-65 for signing keys.',
      reference: 'classical keys whose type has a post-quantum algorithm in this service',
    }),
  },
  {
    code: 'untagged_key',
    define: () => ({
      code: 'untagged_key',
      severity: 'info',
      title: 'Keys without labels',
      recommendation: 'Label them (the tag suggestions propose labels: POST /api/v1/tag-suggestion-jobs).',
      reference: null,
    }),
  },
  {
    code: 'duplicate_purpose',
    define: () => ({
      code: 'duplicate_purpose',
      severity: 'info',
      title: 'Keys that seem to serve the same purpose',
      recommendation:
        'Keys of one type and algorithm sharing a purpose word or a label: keep one per purpose where you can, and label the others to tell them apart.',
      reference:
        'same type and algorithm, and a shared label or a shared significant word in the name or description',
    }),
  },
]

const DAY_MS = 24 * 60 * 60_000

/** What the SQL needs to decide every finding at `now`. */
export function insightCriteria(now: Date): InsightCriteria {
  const t = now.getTime()
  const days = (n: number) => n * DAY_MS
  return {
    now,
    expiredInUseSince: new Date(t - days(INSIGHT_THRESHOLDS.expiredInUseWindowDays)),
    expiringBy: new Date(t + days(INSIGHT_THRESHOLDS.expiryWarningDays)),
    pausedBefore: new Date(t - days(INSIGHT_THRESHOLDS.pausedTooLongDays)),
    unusedSince: new Date(t - days(INSIGHT_THRESHOLDS.unusedDays)),
    weakAlgorithms: Object.keys(WEAK),
    classicalAlgorithms: ALGORITHM_NAMES.filter((a) => !algorithmByName(a).isPostQuantum),
    typesWithCounterpart: Object.keys(PQ_COUNTERPART),
    genericWords: [...GENERIC_WORDS],
    maxListed: MAX_LISTED_KEYS,
    maxGroups: MAX_PURPOSE_GROUPS,
  }
}

/**
 * The findings of a report from the statement's rows, in report order (weak algorithms by
 * name): work bounded by the rows' bound, whatever the tenant's size.
 */
export function assembleFindings(rows: InsightRows): Finding[] {
  const findings: Finding[] = []
  for (const definition of DEFINITIONS) {
    const matching = rows.findings
      .filter((row) => row.code === definition.code && row.count > 0)
      .sort((a, b) =>
        (a.variant ?? '') < (b.variant ?? '') ? -1 : (a.variant ?? '') > (b.variant ?? '') ? 1 : 0,
      )
    for (const row of matching) {
      const finding: Finding = { ...definition.define(row.variant), count: row.count, keys: row.keys }
      if (definition.code === 'duplicate_purpose' && rows.groups.length > 0)
        finding.groups = rows.groups.map(toGroup)
      findings.push(finding)
    }
  }
  return findings
}

const LABEL_MARK = 'label:'

function toGroup(row: PurposeGroupRow): PurposeGroup {
  const label = row.mark.startsWith(LABEL_MARK)
  const [firstName, firstId] = row.first
  const [lastName, lastId] = row.last
  return {
    keyType: row.keyType as KeyType,
    algorithm: row.algorithm as AlgorithmName,
    shared: label
      ? { kind: 'label', value: row.mark.slice(LABEL_MARK.length) }
      : { kind: 'word', value: row.mark },
    count: row.count,
    examples:
      firstId === lastId
        ? [{ id: firstId, name: firstName }]
        : [
            { id: firstId, name: firstName },
            { id: lastId, name: lastName },
          ],
  }
}
