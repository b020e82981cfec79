import { type AlgorithmName, algorithmByName, type KeyType } from '../keys/algorithms.ts'
import { cutText } from '../platform/text.ts'
import {
  type KeyFacts,
  LABEL_PATTERN,
  MAX_LABEL_LENGTH,
  MAX_SUGGESTIONS_PER_KEY,
  type SuggestionContext,
  type TagEngine,
  type TagSuggestion,
} from './tag-engine.ts'

/**
 * The built-in tag engine (docs/insights.md): offline, no configuration, deterministic. Three
 * rules, in priority order:
 *  1. purpose words: the key's name, then its description, read through VOCABULARY;
 *  2. similar keys: a label at least 2 similar keys of the tenant carry;
 *  3. algorithm and type facts: post-quantum/classical, the family, the use.
 * Within a rule, suggestions are ordered by label; the first MAX_SUGGESTIONS_PER_KEY are kept.
 * Every suggestion says why, in terms a person can check against the key.
 */

/** `purpose`: what the key is for (counts for similarity). `context`: where/when (does not). */
type Category = 'purpose' | 'context'

interface VocabularyRow {
  label: string
  category: Category
  /** Whole tokens; a purpose word also matches its plural (+s; a final y as ies). */
  words?: readonly string[]
  /** Whole tokens matched exactly (no plural): context words and short or ambiguous ones. */
  exact?: readonly string[]
  /** Prefixes (at least 5 characters) a token may start with: word families such as invoic-. */
  stems?: readonly string[]
  /** The row applies only to keys of these types (code-signing makes no sense for an AES DEK). */
  onlyFor?: readonly KeyType[]
}

/** The vocabulary, documented row by row in docs/insights.md. */
// biome-ignore format: one row per line, as the table it is
const VOCABULARY: readonly VocabularyRow[] = [
  // What the key protects or serves.
  { label: 'payments', category: 'purpose', words: ['pay', 'payment', 'billing', 'checkout', 'card', 'merchant', 'refund', 'stripe', 'psp', 'acquirer'], stems: ['invoic'] },
  { label: 'pci-dss', category: 'purpose', words: ['pci', 'pcidss', 'cardholder'] },
  { label: 'tokens', category: 'purpose', words: ['jwt', 'jws', 'jwe', 'jwk', 'token', 'oauth', 'oauth2', 'oidc', 'session', 'bearer'] },
  { label: 'auth', category: 'purpose', words: ['auth', 'authn', 'authz', 'login', 'signin', 'sso', 'saml', 'idp', 'mfa', 'totp', 'password'] },
  { label: 'backup', category: 'purpose', words: ['backup', 'snapshot', 'restore'], stems: ['archiv'] },
  { label: 'database', category: 'purpose', words: ['db', 'database', 'postgres', 'postgresql', 'pg', 'mysql', 'mariadb', 'mongo', 'mongodb', 'sql', 'rds', 'dynamodb', 'cassandra', 'tde'] },
  { label: 'cache', category: 'purpose', words: ['cache', 'redis', 'memcached'] },
  { label: 'tls', category: 'purpose', words: ['tls', 'ssl', 'cert', 'certificate', 'x509', 'https', 'mtls', 'pki'] },
  { label: 'pii', category: 'purpose', words: ['pii', 'gdpr', 'customer', 'user', 'personal', 'ssn', 'kyc'] },
  { label: 'phi', category: 'purpose', words: ['phi', 'hipaa', 'patient', 'medical', 'ehr'] },
  { label: 'audit-logs', category: 'purpose', words: ['log', 'logging', 'trail', 'siem'], stems: ['audit'] },
  { label: 'api', category: 'purpose', words: ['api', 'graphql', 'grpc'] },
  { label: 'webhooks', category: 'purpose', words: ['webhook', 'callback', 'hook'] },
  { label: 'messaging', category: 'purpose', words: ['kafka', 'queue', 'event', 'sqs', 'sns', 'pubsub', 'rabbitmq', 'amqp', 'nats', 'mq', 'stream', 'kinesis'], exact: ['streaming'] },
  { label: 'storage', category: 'purpose', words: ['s3', 'bucket', 'storage', 'blob', 'file', 'gcs', 'disk', 'volume', 'ebs', 'nfs'] },
  { label: 'email', category: 'purpose', words: ['email', 'mail', 'smtp', 'dkim', 'imap', 'newsletter'] },
  { label: 'notifications', category: 'purpose', words: ['sms', 'push', 'apns', 'fcm'], stems: ['notif'] },
  { label: 'code-signing', category: 'purpose', words: ['release', 'artifact', 'firmware', 'binary', 'sbom', 'commit', 'git', 'package', 'build', 'codesign', 'cosign', 'sigstore', 'notary', 'container', 'image'], onlyFor: ['Signing'] },
  { label: 'key-wrapping', category: 'purpose', words: ['kek', 'dek', 'wrap', 'envelope'], exact: ['wrapping', 'unwrap'], onlyFor: ['Encryption'] },
  { label: 'secrets', category: 'purpose', words: ['secret', 'credential', 'vault', 'keystore'] },
  { label: 'analytics', category: 'purpose', words: ['analytics', 'metric', 'telemetry', 'warehouse', 'snowflake', 'bigquery', 'report', 'dashboard'], exact: ['reporting'] },
  { label: 'mobile', category: 'purpose', words: ['mobile', 'ios', 'android'] },
  { label: 'iot', category: 'purpose', words: ['iot', 'device', 'sensor', 'fleet'] },
  { label: 'kubernetes', category: 'purpose', words: ['k8s', 'kubernetes', 'kube', 'helm', 'etcd'] },
  { label: 'ci-cd', category: 'purpose', words: ['ci', 'cicd', 'pipeline', 'jenkins', 'github', 'gitlab', 'deploy', 'deployment'] },
  { label: 'hr', category: 'purpose', words: ['payroll', 'employee', 'salary', 'hris'], exact: ['hr'] },
  { label: 'partners', category: 'purpose', words: ['partner', 'vendor', 'supplier', 'b2b'] },
  { label: 'documents', category: 'purpose', words: ['document', 'doc', 'pdf', 'contract', 'esign'] },
  { label: 'blockchain', category: 'purpose', words: ['wallet', 'blockchain', 'bitcoin', 'btc', 'ethereum', 'eth', 'web3'] },
  { label: 'ssh', category: 'purpose', words: ['ssh', 'sftp', 'bastion'] },
  { label: 'vpn', category: 'purpose', words: ['vpn', 'ipsec', 'wireguard'] },
  // Where and when: environments, lifecycle, region. Exact words only ("lives" is not "live").
  { label: 'production', category: 'context', exact: ['prod', 'production', 'live', 'prd'] },
  { label: 'staging', category: 'context', exact: ['stage', 'staging', 'stg', 'preprod', 'uat'] },
  { label: 'development', category: 'context', exact: ['dev', 'devel', 'develop', 'development', 'sandbox', 'local'] },
  { label: 'test', category: 'context', exact: ['test', 'tests', 'testing', 'qa', 'e2e'] },
  { label: 'legacy', category: 'context', exact: ['legacy', 'deprecated', 'old', 'obsolete', 'retired'] },
  { label: 'ephemeral', category: 'context', exact: ['tmp', 'temp', 'temporary', 'ephemeral', 'scratch', 'throwaway'] },
  { label: 'eu', category: 'context', exact: ['eu', 'europe', 'emea'] },
]

interface WordMatch {
  label: string
  category: Category
  /** The token as it appears (lower-cased), for the reason. */
  token: string
}

const plurals = (word: string) =>
  word.endsWith('y') ? [word, `${word}s`, `${word.slice(0, -1)}ies`] : [word, `${word}s`]

/** token → rows (a few words belong to no more than one row; the map keeps the first). */
const WORD_INDEX = new Map<string, VocabularyRow>()
for (const row of VOCABULARY) {
  for (const word of row.words ?? []) for (const form of plurals(word)) setOnce(form, row)
  for (const word of row.exact ?? []) setOnce(word, row)
}
function setOnce(word: string, row: VocabularyRow) {
  if (!WORD_INDEX.has(word)) WORD_INDEX.set(word, row)
}
const STEMS: readonly { stem: string; row: VocabularyRow }[] = VOCABULARY.flatMap((row) =>
  (row.stems ?? []).map((stem) => ({ stem, row })),
)

/**
 * Words: split camelCase (`legacyRsaTls`, `S3Bucket`, `myKMSKey`; an acronym ends before its last
 * capital when at least two precede it, so `IDToken` is id+token but `OAuth` stays oauth), then on
 * everything that is not an ASCII letter or digit; lower-cased. Letters and digits stay together
 * (`s3`, `x509`, `k8s`).
 */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]{2,})([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((t) => t !== '')
}

/** The row a token belongs to: exact word or plural, else a stem, else the token without trailing digits. */
function lookup(token: string): VocabularyRow | undefined {
  const direct = WORD_INDEX.get(token)
  if (direct) return direct
  const stem = STEMS.find((s) => token.startsWith(s.stem))
  if (stem) return stem.row
  const trimmed = token.replace(/\d+$/, '')
  if (trimmed !== token && trimmed.length >= 2) return WORD_INDEX.get(trimmed)
  return undefined
}

function wordMatches(text: string, keyType: KeyType): WordMatch[] {
  const out: WordMatch[] = []
  for (const token of tokenize(text)) {
    const row = lookup(token)
    if (!row || (row.onlyFor && !row.onlyFor.includes(keyType))) continue
    out.push({ label: row.label, category: row.category, token })
  }
  return out
}

/** Labels a key's existing labels already stand for: the label itself, or the label a vocabulary word means. */
function coveredLabels(labels: readonly string[]): Set<string> {
  const covered = new Set<string>()
  for (const label of labels) {
    covered.add(label)
    covered.add(label.toLowerCase())
    const row = WORD_INDEX.get(label.toLowerCase())
    if (row) covered.add(row.label)
  }
  return covered
}

/** Name words that say nothing about what a key is for: compared for similarity without them. */
const GENERIC_NAME_WORDS = new Set([
  ...['a', 'an', 'the', 'and', 'or', 'for', 'of', 'to', 'in', 'on', 'by', 'with'],
  ...['key', 'keys', 'kms', 'new', 'main', 'primary', 'secondary', 'default', 'service', 'svc'],
  ...['sign', 'signing', 'signer', 'signature', 'sig', 'verify'],
  ...['encrypt', 'encryption', 'enc', 'decrypt', 'crypt', 'crypto', 'cipher'],
  ...['hmac', 'mac', 'rsa', 'ec', 'ecc', 'ecdsa', 'ed25519', 'eddsa', 'ml', 'kem', 'dsa', 'mlkem', 'mldsa'],
  ...['slh', 'slhdsa', 'pq', 'pqc', 'sha256', 'sha384', 'sha512', 'p256', 'p384', 'p521'],
])

function isGenericNameWord(token: string): boolean {
  if (token.length < 2 || /^\d+$/.test(token) || /^v\d+$/.test(token)) return true
  if (GENERIC_NAME_WORDS.has(token)) return true
  return WORD_INDEX.get(token)?.category === 'context'
}

interface Profile {
  key: KeyFacts
  purposes: Set<string>
  nameWords: Set<string>
}

const purposesOf = (text: string, keyType: KeyType) =>
  new Set(
    wordMatches(text, keyType)
      .filter((m) => m.category === 'purpose')
      .map((m) => m.label),
  )

/**
 * A key's purposes are those its name shows (a name is chosen; a description is prose that
 * mentions "customers" in passing); a name that shows none lets the description speak.
 */
function profile(key: KeyFacts): Profile {
  // A batch passes the same KeyFacts objects as every key's context: each is read once. The
  // cache entry is used only while the fields it was computed from are unchanged.
  const cached = PROFILES.get(key)
  if (
    cached &&
    cached.key.name === key.name &&
    cached.key.description === key.description &&
    cached.key.keyType === key.keyType &&
    cached.key.algorithm === key.algorithm
  )
    return { ...cached, key }
  const fromName = purposesOf(key.name, key.keyType)
  const purposes = fromName.size > 0 ? fromName : purposesOf(key.description, key.keyType)
  const nameWords = new Set(tokenize(key.name).filter((t) => !isGenericNameWord(t)))
  const computed = { key: { ...key }, purposes, nameWords }
  PROFILES.set(key, computed)
  return { ...computed, key }
}
const PROFILES = new WeakMap<KeyFacts, Profile>()

const intersects = (a: Set<string>, b: Set<string>) => {
  for (const x of a) if (b.has(x)) return true
  return false
}

function isSimilar(self: Profile, other: Profile): boolean {
  if (intersects(self.purposes, other.purposes)) return true
  return (
    self.key.keyType === other.key.keyType &&
    self.key.algorithm === other.key.algorithm &&
    intersects(self.nameWords, other.nameWords)
  )
}

const MIN_SIMILAR_CARRIERS = 2

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** Whole characters only: a key name cut inside an emoji made the batch's insert fail (src/platform/text.ts). */
const shorten = (text: string, max: number) => cutText(text, max)

function similarKeySuggestions(key: KeyFacts, otherKeys: readonly KeyFacts[]): TagSuggestion[] {
  const self = profile(key)
  const carriers = new Map<string, KeyFacts[]>()
  const seenIds = new Set<string>([key.id])
  for (const other of otherKeys) {
    if (seenIds.has(other.id)) continue
    seenIds.add(other.id)
    if (!isSimilar(self, profile(other))) continue
    for (const label of new Set(other.labels)) {
      const list = carriers.get(label)
      if (list) list.push(other)
      else carriers.set(label, [other])
    }
  }
  const out: TagSuggestion[] = []
  for (const [label, keys] of carriers) {
    if (keys.length < MIN_SIMILAR_CARRIERS) continue
    const names = keys
      .map((k) => k.name)
      .sort(compare)
      .map((n) => shorten(n, 40))
    const shown = names.slice(0, 2).join(', ')
    const more = names.length > 2 ? ` and ${names.length - 2} more` : ''
    out.push({ label, reason: `${keys.length} similar keys carry it (${shown}${more})` })
  }
  return out
}

function familyOf(algorithm: AlgorithmName): { label: string; reason: string } {
  if (algorithm.startsWith('ML-KEM-')) return { label: 'ml-kem', reason: `${algorithm} is ML-KEM (FIPS 203)` }
  if (algorithm.startsWith('ML-DSA-')) return { label: 'ml-dsa', reason: `${algorithm} is ML-DSA (FIPS 204)` }
  if (algorithm.startsWith('SLH-DSA-'))
    return { label: 'slh-dsa', reason: `${algorithm} is SLH-DSA (FIPS 205)` }
  if (algorithm.startsWith('RSA-')) return { label: 'rsa', reason: `${algorithm} is an RSA key` }
  if (algorithm.startsWith('EC-')) return { label: 'ecdsa', reason: `${algorithm} is an ECDSA curve` }
  if (algorithm === 'Ed25519') return { label: 'eddsa', reason: 'Ed25519 is an EdDSA algorithm' }
  return { label: 'hmac', reason: `${algorithm} is an HMAC algorithm` }
}

const USE_LABEL: Record<KeyType, string> = { Encryption: 'encryption', Signing: 'signing', HMAC: 'mac' }

function factSuggestions(key: KeyFacts): TagSuggestion[] {
  const algorithm = algorithmByName(key.algorithm)
  const family = familyOf(key.algorithm)
  return [
    algorithm.isPostQuantum
      ? { label: 'post-quantum', reason: `${key.algorithm} is a post-quantum algorithm` }
      : { label: 'classical', reason: `${key.algorithm} is a classical (not post-quantum) algorithm` },
    family,
    { label: USE_LABEL[key.keyType], reason: `the key type is ${key.keyType}` },
  ]
}

function wordSuggestions(field: 'name' | 'description', text: string, keyType: KeyType): TagSuggestion[] {
  const out: TagSuggestion[] = []
  const seen = new Set<string>()
  for (const match of wordMatches(text, keyType)) {
    if (seen.has(match.label)) continue
    seen.add(match.label)
    out.push({ label: match.label, reason: `the ${field} contains '${shorten(match.token, 40)}'` })
  }
  return out
}

const isValidLabel = (label: string) => label.length <= MAX_LABEL_LENGTH && LABEL_PATTERN.test(label)

/** The built-in engine's suggestions for one key (synchronous; the engine wraps it). */
export function suggestBuiltin(key: KeyFacts, context: SuggestionContext): TagSuggestion[] {
  const tiers: TagSuggestion[][] = [
    wordSuggestions('name', key.name, key.keyType),
    wordSuggestions('description', key.description, key.keyType),
    similarKeySuggestions(key, context.otherKeys),
    factSuggestions(key),
  ]
  const excluded = coveredLabels(key.labels)
  const out: TagSuggestion[] = []
  for (const tier of tiers) {
    for (const suggestion of [...tier].sort((a, b) => compare(a.label, b.label))) {
      if (out.length >= MAX_SUGGESTIONS_PER_KEY) return out
      if (excluded.has(suggestion.label) || !isValidLabel(suggestion.label)) continue
      excluded.add(suggestion.label)
      out.push(suggestion)
    }
  }
  return out
}

export function createBuiltinEngine(): TagEngine {
  return {
    name: 'builtin',
    suggest: async (key, context) => suggestBuiltin(key, context),
  }
}

type SampleRow = [
  name: string,
  algorithm: AlgorithmName,
  keyType: KeyType,
  description: string,
  labels?: string[],
]

// biome-ignore format: one key per line, as the table it is
const SAMPLE_ROWS: SampleRow[] = [
  ['payments-prod-signing', 'ML-DSA-65', 'Signing', 'Signs payment authorisations sent to the card processor', ['team-payments', 'tier-1']],
  ['billing-invoice-signing', 'ML-DSA-65', 'Signing', 'Signs PDF invoices emailed to customers', ['team-payments']],
  ['payments-webhook-hmac', 'HMAC-SHA256', 'HMAC', 'Authenticates payment status callbacks from the PSP'],
  ['checkoutCardEncryption', 'RSA-3072', 'Encryption', 'Encrypts card numbers in the checkout flow before they reach the database', ['pci-dss']],
  ['customer-pii-encryption', 'ML-KEM-768', 'Encryption', 'Envelope encryption for customer names, addresses and phone numbers (GDPR scope)', ['gdpr', 'team-privacy']],
  ['user-profile-encryption-eu', 'ML-KEM-768', 'Encryption', 'Encrypts user profile fields stored in the Frankfurt region', ['team-privacy']],
  ['jwt-signing-staging', 'EC-P256', 'Signing', 'Signs access tokens issued by the staging OAuth server'],
  ['jwt-signing-prod', 'EC-P256', 'Signing', 'Signs access tokens issued by the production OAuth server', ['team-identity', 'tier-1']],
  ['oidc-id-token-signer', 'ML-DSA-44', 'Signing', 'ID tokens for the customer login (OpenID Connect)', ['team-identity']],
  ['session-cookie-hmac', 'HMAC-SHA256', 'HMAC', 'Integrity of web session cookies'],
  ['backup-archive-2024', 'ML-KEM-1024', 'Encryption', 'Encrypts nightly database backups kept for seven years'],
  ['backup-archive-2023', 'RSA-4096', 'Encryption', "Last year's backup archive, read-only, kept for restores", ['retention-7y']],
  ['db-backups-postgres', 'ML-KEM-768', 'Encryption', 'pg_dump files of the orders database', ['retention-7y']],
  ['legacyRsaTls', 'RSA-2048', 'Signing', 'Old TLS certificate key for the partner API gateway; replace before 2026'],
  ['api-gateway-mtls', 'EC-P384', 'Signing', 'Client certificates for mutual TLS between the gateway and internal services', ['team-platform']],
  ['internal-ca-root', 'EC-P384', 'Signing', 'Root of the internal certificate authority that issues service certs', ['team-platform', 'pki']],
  ['audit-log-signing', 'Ed25519', 'Signing', 'Signs each batch of the tamper-evident audit trail', ['compliance']],
  ['release-artifact-signing', 'SLH-DSA-128s', 'Signing', 'Signs release binaries and SBOMs published by CI', ['team-build']],
  ['firmware-update-signing', 'ML-DSA-87', 'Signing', 'Signs firmware images pushed to field devices', ['team-devices']],
  ['kafka-events-encryption', 'ML-KEM-512', 'Encryption', 'Encrypts order events on the Kafka bus'],
  ['s3-bucket-documents', 'RSA-3072', 'Encryption', 'Server-side encryption for the contracts bucket'],
  ['webhookDeliverySigning', 'Ed25519', 'Signing', 'Signs outgoing webhook deliveries to subscriber endpoints'],
  ['search-indexer-prod', 'Ed25519', 'Signing', 'Signs index manifests shipped to the query nodes', ['team-search']],
  ['search-indexer-staging', 'Ed25519', 'Signing', 'Signs index manifests in staging', ['team-search']],
  ['search-indexer-dev', 'Ed25519', 'Signing', 'Local development copy of the indexer key'],
  ['hr-payroll-encryption', 'RSA-4096', 'Encryption', 'Encrypts salary exports sent to the payroll provider'],
  ['mobile-push-hmac', 'HMAC-SHA384', 'HMAC', 'Authenticates push notification payloads for the iOS and Android apps'],
  ['tmp-migration-key', 'ML-KEM-768', 'Encryption', 'Temporary key for the 2025 data-centre migration; delete after cut-over'],
  ['qa-sandbox-signing', 'ML-DSA-65', 'Signing', 'Throwaway key for QA test runs', ['test']],
  ['svc-7f3a', 'ML-KEM-768', 'Encryption', ''],
]

/**
 * Thirty realistic keys of one tenant (ids sample-01 to sample-30): the fixed input of
 * test/fixtures/tag-suggestions.json and of the table in docs/insights.md, where each key's
 * context is the other 29.
 */
export const SAMPLE_KEYS: KeyFacts[] = SAMPLE_ROWS.map(
  ([name, algorithm, keyType, description, labels], i) => ({
    id: `sample-${String(i + 1).padStart(2, '0')}`,
    name,
    algorithm,
    keyType,
    description,
    labels: labels ?? [],
  }),
)
