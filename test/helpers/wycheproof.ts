import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import {
  bodyOf,
  dekFromSharedSecret,
  headerBytes,
  kemRecovery,
  openEnvelope,
  partsOf,
  SCHEMES,
  sealEnvelope,
} from './envelope-parts.ts'
import type { HttpResult } from './service.ts'
import { PROJECT_ROOT } from './service.ts'

/**
 * The Wycheproof runner's parts that are not about one algorithm: the vector files, the verdict of
 * one vector, the per-file report and its JSON and Markdown forms, and an ML-KEM envelope builder
 * written from docs/envelope-format.md with independent cryptography (noble), for sending
 * decapsulation vectors through POST /decrypt.
 */

/** The C2SP Wycheproof files, copied unmodified into the repository (test/vectors/wycheproof/SOURCE.txt). */
export const VECTOR_DIR = resolve(PROJECT_ROOT, 'test', 'vectors', 'wycheproof')

export type Expected = 'valid' | 'invalid' | 'acceptable'

export interface WycheproofTest {
  tcId: number
  comment?: string
  flags?: string[]
  result: Expected
  [field: string]: unknown
}

export interface WycheproofGroup {
  type: string
  tests: WycheproofTest[]
  [field: string]: unknown
}

export interface VectorFile {
  file: string
  algorithm: string
  schema: string
  numberOfTests: number
  testGroups: WycheproofGroup[]
}

/** Why the vector directory is unusable, or undefined when it holds vector files. */
export function vectorDirProblem(dir = VECTOR_DIR): string | undefined {
  if (!existsSync(dir)) {
    return `The Wycheproof vectors are not at ${dir} (test/vectors/wycheproof: the C2SP files, copied unmodified, SOURCE.txt)`
  }
  if (vectorFileNames(dir).length === 0) return `${dir} holds no *.json vector file`
  return undefined
}

export function vectorFileNames(dir = VECTOR_DIR): string[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.json'))
    .sort()
}

export function loadVectorFile(name: string, dir = VECTOR_DIR): VectorFile {
  const parsed = JSON.parse(readFileSync(join(dir, name), 'utf8')) as Omit<VectorFile, 'file'>
  const counted = parsed.testGroups.reduce((n, g) => n + g.tests.length, 0)
  if (counted !== parsed.numberOfTests) {
    throw new Error(`${name}: numberOfTests says ${parsed.numberOfTests}, the groups hold ${counted}`)
  }
  return { file: name, ...parsed }
}

/** The commit the vectors were copied from (SOURCE.txt), for the report. */
export function vectorSource(dir = VECTOR_DIR): string {
  try {
    const text = readFileSync(join(dir, 'SOURCE.txt'), 'utf8')
    const commit = /Commit:\s*([0-9a-f]{40})/.exec(text)?.[1]
    return commit ? `C2SP/wycheproof@${commit}` : 'C2SP/wycheproof (SOURCE.txt names no commit)'
  } catch {
    return 'C2SP/wycheproof (no SOURCE.txt)'
  }
}

export const hex = (text: unknown) => Buffer.from(typeof text === 'string' ? text : '', 'hex')

// ---- The verdict of one vector ----------------------------------------------------------------

/**
 * What the service did with a vector: accepted it (a signature or MAC verified, the expected
 * plaintext came back), rejected it (valid:false, a 400, an import refused), answered something
 * that is neither (a 5xx, a 404, another plaintext: always a failure), or the vector cannot be
 * expressed through the public API (inapplicable, with the reason).
 */
export type Outcome =
  | { kind: 'accepted'; how: string }
  | { kind: 'rejected'; how: string }
  | { kind: 'wrong'; how: string }
  | { kind: 'inapplicable'; reason: string }

export interface Verdict {
  group: number
  tcId: number
  expected: Expected
  comment: string
  outcome: Outcome
}

/** The reason for the valid ML-KEM encapsulation vectors: fixed, since the acceptance counts them. */
export const CALLER_RANDOMNESS =
  'valid ML-KEM encapsulation vector: its result depends on the caller-chosen randomness m, which a public API must not accept'

export function passes(verdict: Verdict): boolean {
  const { kind } = verdict.outcome
  if (verdict.expected === 'acceptable') return kind === 'accepted' || kind === 'rejected'
  if (verdict.expected === 'valid') return kind === 'accepted'
  return kind === 'rejected'
}

/** `400 decryption_failed`, `400 validation_failed body/iv`: what an error answer says, briefly. */
export function describeError(res: HttpResult): string {
  const code = typeof res.body?.error === 'string' ? res.body.error : 'no error code'
  const field = Array.isArray(res.body?.fields) ? res.body.fields[0]?.path : undefined
  return `${res.status} ${code}${field ? ` ${field}` : ''}`
}

/** A check beside the vectors (an exported public key, an encryption round trip), counted per file. */
export interface Control {
  name: string
  checked: number
  passed: number
  failures: string[]
}

export class Controls {
  readonly #controls = new Map<string, Control>()

  record(name: string, ok: boolean, failure: () => string): void {
    let control = this.#controls.get(name)
    if (!control) {
      control = { name, checked: 0, passed: 0, failures: [] }
      this.#controls.set(name, control)
    }
    control.checked++
    if (ok) control.passed++
    else if (control.failures.length < 20) control.failures.push(failure())
  }

  list(): Control[] {
    return [...this.#controls.values()]
  }
}

// ---- Reports ----------------------------------------------------------------------------------

export interface FileReport {
  file: string
  algorithm: string
  total: number
  applicable: number
  passed: number
  /** Applicable vectors whose expected result is `acceptable`: passed whichever way the service went. */
  acceptable: number
  /** Valid ML-KEM encapsulation vectors that need caller-chosen randomness (not applicable). */
  callerRandomness: number
  /** How the applicable valid vectors were accepted, and the invalid ones rejected. */
  accepted: Record<string, number>
  rejected: Record<string, number>
  inapplicable: { reason: string; groups: number; tests: number }[]
  controls: Control[]
  failures: { tcId: number; expected: Expected; comment: string; got: string }[]
}

const tally = (into: Record<string, number>, key: string) => {
  into[key] = (into[key] ?? 0) + 1
}

export function fileReport(file: VectorFile, verdicts: Verdict[], controls: Control[]): FileReport {
  if (verdicts.length !== file.numberOfTests) {
    throw new Error(`${file.file}: ${verdicts.length} verdicts for ${file.numberOfTests} vectors`)
  }
  const report: FileReport = {
    file: file.file,
    algorithm: file.algorithm,
    total: file.numberOfTests,
    applicable: 0,
    passed: 0,
    acceptable: 0,
    callerRandomness: 0,
    accepted: {},
    rejected: {},
    inapplicable: [],
    controls,
    failures: [],
  }
  const reasons = new Map<string, { groups: Set<number>; tests: number }>()
  for (const verdict of verdicts) {
    const { outcome } = verdict
    if (outcome.kind === 'inapplicable') {
      const entry = reasons.get(outcome.reason) ?? { groups: new Set(), tests: 0 }
      entry.groups.add(verdict.group)
      entry.tests++
      reasons.set(outcome.reason, entry)
      if (outcome.reason === CALLER_RANDOMNESS) report.callerRandomness++
      continue
    }
    report.applicable++
    if (verdict.expected === 'acceptable') report.acceptable++
    if (passes(verdict)) {
      report.passed++
      if (outcome.kind === 'accepted') tally(report.accepted, outcome.how)
      if (outcome.kind === 'rejected') tally(report.rejected, outcome.how)
    } else {
      report.failures.push({
        tcId: verdict.tcId,
        expected: verdict.expected,
        comment: verdict.comment,
        got: `${outcome.kind}: ${outcome.how}`,
      })
    }
  }
  report.inapplicable = [...reasons].map(([reason, { groups, tests }]) => ({
    reason,
    groups: groups.size,
    tests,
  }))
  return report
}

export interface Summary {
  source: string
  total: number
  callerRandomness: number
  /** Shipped vectors less the ones needing caller randomness: the acceptance's denominator. */
  counted: number
  applicable: number
  passed: number
  acceptable: number
  /** applicable / counted, in percent. */
  coverage: number
  files: FileReport[]
}

export function summarize(files: FileReport[], source: string): Summary {
  const sum = (pick: (r: FileReport) => number) => files.reduce((n, r) => n + pick(r), 0)
  const total = sum((r) => r.total)
  const callerRandomness = sum((r) => r.callerRandomness)
  const counted = total - callerRandomness
  const applicable = sum((r) => r.applicable)
  return {
    source,
    total,
    callerRandomness,
    counted,
    applicable,
    passed: sum((r) => r.passed),
    acceptable: sum((r) => r.acceptable),
    coverage: counted === 0 ? 0 : (100 * applicable) / counted,
    files,
  }
}

const counts = (record: Record<string, number>) =>
  Object.entries(record)
    .sort((a, b) => b[1] - a[1])
    .map(([how, n]) => `${how} ${n}`)
    .join('; ')

/** Failed vectors listed per file in the Markdown table. */
const FAILURES_SHOWN = 10

export function markdown(summary: Summary): string {
  const lines: string[] = []
  lines.push('## Wycheproof vectors through the public API', '')
  lines.push(
    `Vectors: ${summary.source}, every file in test/vectors/wycheproof, each vector sent over HTTP ` +
      'to a test service (test/crypto/wycheproof.test.ts).',
    '',
  )
  lines.push('| File | Total | Applicable | Passed | Acceptable | Not applicable |')
  lines.push('|---|---:|---:|---:|---:|---:|')
  for (const r of summary.files) {
    lines.push(
      `| ${r.file} | ${r.total} | ${r.applicable} | ${r.passed} | ${r.acceptable} | ${r.total - r.applicable} |`,
    )
  }
  lines.push(
    `| **All** | ${summary.total} | ${summary.applicable} | ${summary.passed} | ${summary.acceptable} | ` +
      `${summary.total - summary.applicable} |`,
    '',
  )
  lines.push(
    `Applicable: ${summary.applicable} of the ${summary.counted} shipped vectors that do not need caller-chosen ` +
      `randomness (${summary.coverage.toFixed(1)}%); ${summary.callerRandomness} valid ML-KEM encapsulation ` +
      `vectors need it. Passed: ${summary.passed} of ${summary.applicable} applicable.`,
    '',
  )
  lines.push('### Not applicable', '')
  const inapplicable = summary.files.flatMap((r) =>
    r.inapplicable.map(
      (i) => `- ${r.file}: ${i.tests} vectors in ${i.groups} group${i.groups === 1 ? '' : 's'}: ${i.reason}`,
    ),
  )
  lines.push(...(inapplicable.length > 0 ? inapplicable : ['- none']), '')
  lines.push('### How the service answered', '')
  for (const r of summary.files) {
    const parts = [
      Object.keys(r.accepted).length > 0 ? `valid accepted as ${counts(r.accepted)}` : '',
      Object.keys(r.rejected).length > 0 ? `invalid rejected as ${counts(r.rejected)}` : '',
    ].filter(Boolean)
    lines.push(`- ${r.file}: ${parts.join('. ') || 'nothing applicable'}`)
  }
  lines.push('')
  const controls = summary.files.flatMap((r) =>
    r.controls.map((c) => `- ${r.file}: ${c.name}: ${c.passed} of ${c.checked}`),
  )
  if (controls.length > 0) lines.push('### Checks beside the vectors', '', ...controls, '')
  // The JSON has every failure; the table shows the first of each file.
  const failures = summary.files.flatMap((r) => [
    ...r.failures
      .slice(0, FAILURES_SHOWN)
      .map((f) => `- ${r.file} tcId ${f.tcId} (${f.expected}, ${f.comment || 'no comment'}): ${f.got}`),
    ...(r.failures.length > FAILURES_SHOWN
      ? [`- ${r.file}: ${r.failures.length - FAILURES_SHOWN} more (test-results/wycheproof.json)`]
      : []),
    ...r.controls.flatMap((c) => c.failures.map((f) => `- ${r.file}: ${c.name}: ${f}`)),
  ])
  if (failures.length > 0) lines.push('### Failures', '', ...failures, '')
  return lines.join('\n')
}

// ---- ML-KEM envelopes, from docs/envelope-format.md (envelope-parts.ts) ----------------------

export interface JsonEnvelope {
  ciphertext: string
  encapsulatedKey: string
  nonce: string
  tag: string
}

/**
 * The envelope /encrypt would have written had ML-KEM encapsulation produced `kemCiphertext` and
 * `sharedSecret` for this key version: what lets a decapsulation vector (c, K) reach the
 * service's decapsulation through POST /decrypt.
 */
export function sealMlKemEnvelope(input: {
  keyId: string
  keyVersion: number
  kemCiphertext: Uint8Array
  sharedSecret: Uint8Array
  plaintext: Uint8Array
  context: string
  nonce: Uint8Array
}): JsonEnvelope {
  const header = headerBytes(SCHEMES.mlKem, input.keyId, input.keyVersion)
  return bodyOf(
    sealEnvelope({
      header,
      protectedDek: input.kemCiphertext,
      dek: dekFromSharedSecret(input.sharedSecret, header),
      plaintext: input.plaintext,
      context: input.context,
      nonce: input.nonce,
    }),
  )
}

/** Opens an /encrypt envelope given the shared secret its ML-KEM ciphertext decapsulates to. */
export function openMlKemEnvelope(
  envelope: JsonEnvelope,
  decapsulate: (kemCiphertext: Uint8Array) => Uint8Array,
  context: string,
): Buffer {
  return openEnvelope(partsOf(envelope), kemRecovery(SCHEMES.mlKem, decapsulate), { context })
}
