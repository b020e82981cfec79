import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { dirname, join } from 'node:path'
import { after, before, beforeEach, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import {
  createBuiltinEngine,
  SAMPLE_KEYS,
  suggestBuiltin,
  tokenize,
} from '../../src/intelligence/builtin-engine.ts'
import {
  cleanReason,
  createModelEngine,
  MAX_REASON_LENGTH,
  type ModelEngineOptions,
  RESPONSE_SCHEMA,
} from '../../src/intelligence/model-engine.ts'
import {
  type KeyFacts,
  LABEL_PATTERN,
  MAX_LABEL_LENGTH,
  MAX_SUGGESTIONS_PER_KEY,
  type TagEngine,
  type TagSuggestion,
} from '../../src/intelligence/tag-engine.ts'
import { createAllowList } from '../../src/outbound/allow-list.ts'
import { createOutboundClient } from '../../src/outbound/outbound-client.ts'
import { clipText, codePointLength, cutText } from '../../src/platform/text.ts'
import { type FakeChatCompletions, startFakeChatCompletions } from '../helpers/fake-chat-completions.ts'

/**
 * The two tag engines (docs/insights.md). The built-in engine against the 30 sample keys (a
 * committed snapshot, test/fixtures/tag-suggestions.json: UPDATE_SNAPSHOT=1 rewrites it,
 * PRINT_TAG_TABLE=1 prints the table of inputs and suggestions as markdown) and hand-picked
 * keys; the model engine against a local chat-completions server in each of its modes.
 */

const SNAPSHOT = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tag-suggestions.json')

const key = (fields: Partial<KeyFacts> & Pick<KeyFacts, 'name'>): KeyFacts => ({
  id: `k-${fields.name}`,
  algorithm: 'ML-DSA-65',
  keyType: 'Signing',
  description: '',
  labels: [],
  ...fields,
})

const labelsOf = (suggestions: TagSuggestion[]) => suggestions.map((s) => s.label)

/** Every suggestion list obeys the TagEngine contract for its key. */
function assertContract(k: KeyFacts, suggestions: TagSuggestion[]) {
  assert.ok(suggestions.length <= MAX_SUGGESTIONS_PER_KEY, `${k.name}: at most ${MAX_SUGGESTIONS_PER_KEY}`)
  const labels = labelsOf(suggestions)
  assert.equal(new Set(labels).size, labels.length, `${k.name}: no duplicates`)
  for (const s of suggestions) {
    assert.match(s.label, LABEL_PATTERN, `${k.name}: ${s.label} matches the pattern`)
    assert.ok(s.label.length <= MAX_LABEL_LENGTH)
    assert.ok(!k.labels.includes(s.label), `${k.name}: ${s.label} is not a label it has`)
    assert.ok(s.reason.trim().length > 0, `${k.name}: ${s.label} has a reason`)
  }
}

async function suggestAll(engine: TagEngine, keys: readonly KeyFacts[]) {
  const out = []
  for (const k of keys) {
    const others = keys.filter((o) => o.id !== k.id)
    out.push({ ...k, labels: [...k.labels], suggestions: await engine.suggest(k, { otherKeys: others }) })
  }
  return out
}

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ')

function markdownTable(rows: Awaited<ReturnType<typeof suggestAll>>): string {
  const lines = [
    '| # | Name | Algorithm (type) | Description | Existing labels | Suggestions (why) |',
    '|---|------|------------------|-------------|-----------------|-------------------|',
  ]
  rows.forEach((r, i) => {
    const existing = r.labels.length ? r.labels.map((l) => `\`${l}\``).join(', ') : '—'
    const suggestions = r.suggestions.map((s) => `\`${s.label}\` (${cell(s.reason)})`).join('<br>')
    lines.push(
      `| ${i + 1} | \`${cell(r.name)}\` | ${r.algorithm} (${r.keyType}) | ${cell(r.description) || '—'} | ${existing} | ${suggestions || '—'} |`,
    )
  })
  return `${lines.join('\n')}\n`
}

/** What the model engine answers when it falls back: the built-in engine's suggestions, marked as its. */
const asFallback = (suggestions: TagSuggestion[]) =>
  suggestions.map((s) => ({ ...s, engine: 'builtin' as const }))

describe('built-in engine', () => {
  const engine = createBuiltinEngine()

  test('is named builtin', () => assert.equal(engine.name, 'builtin'))

  test('the sample keys: 30 of them, valid, distinct', () => {
    assert.equal(SAMPLE_KEYS.length, 30)
    assert.equal(new Set(SAMPLE_KEYS.map((k) => k.id)).size, 30)
    assert.equal(new Set(SAMPLE_KEYS.map((k) => k.name)).size, 30)
    assert.ok(SAMPLE_KEYS.filter((k) => k.labels.length > 0).length >= 5, 'a few carry labels')
  })

  test('deterministic: twice the same output, order included; the order of other keys does not matter', async () => {
    const first = await suggestAll(engine, SAMPLE_KEYS)
    const second = await suggestAll(engine, SAMPLE_KEYS)
    assert.deepEqual(second, first)
    assert.equal(markdownTable(second), markdownTable(first))
    const reversed = [...SAMPLE_KEYS].reverse()
    for (const row of first) {
      const k = SAMPLE_KEYS.find((s) => s.id === row.id)!
      const again = await engine.suggest(k, { otherKeys: reversed.filter((o) => o.id !== k.id) })
      assert.deepEqual(again, row.suggestions, `${k.name}: same with the other keys reversed`)
    }
  })

  test('the sample keys give the committed snapshot (UPDATE_SNAPSHOT=1 rewrites it)', async () => {
    const rows = await suggestAll(engine, SAMPLE_KEYS)
    const text = `${JSON.stringify(rows, null, 2)}\n`
    if (process.env['UPDATE_SNAPSHOT'] === '1') {
      mkdirSync(dirname(SNAPSHOT), { recursive: true })
      writeFileSync(SNAPSHOT, text)
    }
    assert.ok(existsSync(SNAPSHOT), 'the snapshot exists (create it with UPDATE_SNAPSHOT=1)')
    assert.deepEqual(JSON.parse(text), JSON.parse(readFileSync(SNAPSHOT, 'utf8')))
    if (process.env['PRINT_TAG_TABLE'] === '1') process.stdout.write(`\n${markdownTable(rows)}\n`)
  })

  test('every sample key: the contract holds; every key gets at least its algorithm facts', async () => {
    for (const row of await suggestAll(engine, SAMPLE_KEYS)) {
      assertContract(row, row.suggestions)
      assert.ok(row.suggestions.length >= 1)
    }
  })

  test('purpose words of the name come first, then the description, then similar keys, then facts', async () => {
    const k = SAMPLE_KEYS.find((s) => s.name === 'payments-webhook-hmac')!
    const got = await engine.suggest(k, { otherKeys: SAMPLE_KEYS.filter((o) => o.id !== k.id) })
    assert.deepEqual(got, [
      { label: 'payments', reason: "the name contains 'payments'" },
      { label: 'webhooks', reason: "the name contains 'webhook'" },
      {
        label: 'team-payments',
        reason: '2 similar keys carry it (billing-invoice-signing, payments-prod-signing)',
      },
      { label: 'classical', reason: 'HMAC-SHA256 is a classical (not post-quantum) algorithm' },
      { label: 'hmac', reason: 'HMAC-SHA256 is an HMAC algorithm' },
      { label: 'mac', reason: 'the key type is HMAC' },
    ])
  })

  test('algorithm and type facts', async () => {
    const cases: [KeyFacts, string[]][] = [
      [
        key({ name: 'k1', algorithm: 'ML-KEM-768', keyType: 'Encryption' }),
        ['encryption', 'ml-kem', 'post-quantum'],
      ],
      [
        key({ name: 'k2', algorithm: 'ML-DSA-87', keyType: 'Signing' }),
        ['ml-dsa', 'post-quantum', 'signing'],
      ],
      [
        key({ name: 'k3', algorithm: 'SLH-DSA-128s', keyType: 'Signing' }),
        ['post-quantum', 'signing', 'slh-dsa'],
      ],
      [key({ name: 'k4', algorithm: 'RSA-2048', keyType: 'Encryption' }), ['classical', 'encryption', 'rsa']],
      [key({ name: 'k5', algorithm: 'EC-P521', keyType: 'Signing' }), ['classical', 'ecdsa', 'signing']],
      [key({ name: 'k6', algorithm: 'Ed25519', keyType: 'Signing' }), ['classical', 'eddsa', 'signing']],
      [key({ name: 'k7', algorithm: 'HMAC-SHA512', keyType: 'HMAC' }), ['classical', 'hmac', 'mac']],
    ]
    for (const [k, expected] of cases) {
      assert.deepEqual(labelsOf(await engine.suggest(k, { otherKeys: [] })), expected, k.algorithm)
    }
  })

  test('words: camelCase and separators split, whole tokens only, documented stems and plurals', async () => {
    assert.deepEqual(tokenize('legacyRsaTls'), ['legacy', 'rsa', 'tls'])
    assert.deepEqual(tokenize('OAuthIDToken_v2'), ['oauth', 'id', 'token', 'v2'])
    assert.deepEqual(tokenize('S3Bucket.x509-k8s'), ['s3', 'bucket', 'x509', 'k8s'])
    const words = async (name: string, description = '', keyType: KeyFacts['keyType'] = 'Signing') =>
      labelsOf(
        await engine.suggest(
          key({
            name,
            description,
            keyType,
            algorithm: keyType === 'Encryption' ? 'ML-KEM-768' : 'ML-DSA-65',
          }),
          { otherKeys: [] },
        ),
      ).filter((l) => !['ml-dsa', 'ml-kem', 'post-quantum', 'signing', 'encryption'].includes(l))
    assert.deepEqual(await words('legacyRsaTls'), ['legacy', 'tls'])
    // Substrings do not count: "prodigy" is not prod, "authors" not auth, "payload" not pay, "restful" not rest.
    assert.deepEqual(await words('prodigy-authors-payload', 'restful lives in the catalog'), [])
    // Plurals of purpose words and documented stems do; environment words match exactly.
    assert.deepEqual(await words('invoicing-webhooks', 'archived monthly'), [
      'payments',
      'webhooks',
      'backup',
    ])
    // Trailing digits are tried off: db01 is db.
    assert.deepEqual(await words('db01-prod'), ['database', 'production'])
    // Type-bound rows: a build cache encryption key is not code signing.
    assert.deepEqual(await words('build-cache', '', 'Encryption'), ['cache'])
    assert.deepEqual(await words('build-cache'), ['cache', 'code-signing'])
  })

  test('never a label the key has, nor the label one of its labels is a vocabulary word for', async () => {
    const k = key({ name: 'payments-prod-tls', labels: ['payments', 'prod', 'pki'] })
    const got = labelsOf(await engine.suggest(k, { otherKeys: [] }))
    assert.ok(!got.includes('payments'), 'has it')
    assert.ok(!got.includes('production'), "'prod' stands for it")
    assert.ok(!got.includes('tls'), "'pki' stands for it")
    assert.deepEqual(got, ['ml-dsa', 'post-quantum', 'signing'])
  })

  test('similar keys: a label carried by at least 2 of them; the reason counts them', async () => {
    const carrier = (n: number, name: string, labels: string[], extra: Partial<KeyFacts> = {}) =>
      key({ id: `c${n}`, name, labels, ...extra })
    const self = key({ id: 'self', name: 'orders-export', algorithm: 'Ed25519' })
    // By purpose: two payments keys carry team-payments; one carries solo.
    const byPurpose = key({ id: 'p', name: 'billing-hmac', algorithm: 'HMAC-SHA256', keyType: 'HMAC' })
    const others = [
      carrier(1, 'payments-a', ['team-payments', 'solo']),
      carrier(2, 'checkout-b', ['team-payments', 'Not A Label']),
      carrier(3, 'unrelated-x', ['team-payments']),
      carrier(4, 'cards-c', ['Not A Label']),
    ]
    const got = await engine.suggest(byPurpose, { otherKeys: others })
    const team = got.find((s) => s.label === 'team-payments')
    assert.deepEqual(team, {
      label: 'team-payments',
      reason: '2 similar keys carry it (checkout-b, payments-a)',
    })
    assert.ok(!labelsOf(got).includes('solo'), 'one carrier is not enough')
    assert.ok(
      !labelsOf(got).some((l) => !LABEL_PATTERN.test(l)),
      'labels off the pattern are never suggested',
    )
    // By algorithm, type and a name word; generic words (key, signing, prod, numbers) do not count.
    const sameAlg = [
      carrier(5, 'orders-feed', ['team-orders'], { algorithm: 'Ed25519' }),
      carrier(6, 'orders-audit', ['team-orders'], { algorithm: 'Ed25519' }),
      carrier(7, 'orders-other', ['team-orders'], { algorithm: 'ML-DSA-65' }),
      carrier(8, 'export-signing-key', ['team-export'], { algorithm: 'Ed25519' }),
      carrier(9, 'signing-key-prod', ['generic'], { algorithm: 'Ed25519' }),
      carrier(10, 'prod-key-2024', ['generic'], { algorithm: 'Ed25519' }),
    ]
    const viaName = await engine.suggest(self, { otherKeys: sameAlg })
    assert.deepEqual(
      viaName.find((s) => s.label === 'team-orders'),
      { label: 'team-orders', reason: '2 similar keys carry it (orders-audit, orders-feed)' },
    )
    assert.ok(!labelsOf(viaName).includes('team-export'))
    assert.ok(!labelsOf(viaName).includes('generic'))
    // The key itself among the other keys, or a key listed twice, is not counted.
    const twice = [carrier(5, 'orders-feed', ['team-orders'], { algorithm: 'Ed25519' })]
    const selfListed = { ...self, labels: ['team-orders'] }
    const none = await engine.suggest(self, { otherKeys: [...twice, ...twice, selfListed] })
    assert.ok(!labelsOf(none).includes('team-orders'))
  })

  test('a key object changed between calls is read again (no stale similarity)', async () => {
    const self = key({ id: 'self', name: 'orders-export', algorithm: 'Ed25519' })
    const a = key({ id: 'a', name: 'orders-feed', algorithm: 'Ed25519', labels: ['team-orders'] })
    const b = key({ id: 'b', name: 'orders-audit', algorithm: 'Ed25519', labels: ['team-orders'] })
    const context = { otherKeys: [a, b] }
    assert.ok(labelsOf(await engine.suggest(self, context)).includes('team-orders'))
    a.name = 'unrelated-feed'
    assert.ok(!labelsOf(await engine.suggest(self, context)).includes('team-orders'))
  })

  test('at most MAX_SUGGESTIONS_PER_KEY, name words first, ties by label', async () => {
    const k = key({
      name: 'prod-payments-jwt-backup-db-tls-api-webhook-kafka-s3',
      description: 'customer audit logs',
    })
    const got = await engine.suggest(k, { otherKeys: [] })
    assert.equal(got.length, MAX_SUGGESTIONS_PER_KEY)
    assert.deepEqual(labelsOf(got), [
      'api',
      'backup',
      'database',
      'messaging',
      'payments',
      'production',
      'storage',
      'tls',
    ])
    assertContract(k, got)
  })

  test('hand-picked sample keys', async () => {
    const rows = await suggestAll(engine, SAMPLE_KEYS)
    const of = (name: string) => {
      const row = rows.find((r) => r.name === name)
      assert.ok(row, name)
      return row.suggestions
    }
    assert.deepEqual(labelsOf(of('legacyRsaTls')).slice(0, 2), ['legacy', 'tls'])
    assert.ok(labelsOf(of('legacyRsaTls')).includes('team-platform'))
    assert.deepEqual(labelsOf(of('search-indexer-dev')).slice(0, 2), ['development', 'team-search'])
    assert.ok(labelsOf(of('backup-archive-2024')).includes('retention-7y'))
    assert.ok(!labelsOf(of('customer-pii-encryption')).includes('pii'), "its label 'gdpr' stands for pii")
    assert.ok(!labelsOf(of('qa-sandbox-signing')).includes('test'), 'it has test')
    assert.deepEqual(labelsOf(of('svc-7f3a')), ['encryption', 'ml-kem', 'post-quantum'])
    assert.deepEqual(of('payments-prod-signing')[0], {
      label: 'payments',
      reason: "the name contains 'payments'",
    })
  })
})

describe('reasons cut on whole characters (issue 31, defect 5)', () => {
  const KEY_EMOJI = '\u{1F511}'
  /** A stored reason must survive JSON: no lone surrogate, and PostgreSQL's json accepts it. */
  const storable = (text: string) => text.isWellFormed() && JSON.parse(JSON.stringify(text)) === text

  test('cutText: code points counted, graphemes kept whole, lone surrogates replaced', () => {
    assert.equal(cutText('short', 40), 'short')
    // 38 characters and an emoji: 40 UTF-16 units but 39 code points, under the bound.
    assert.equal(cutText(`${'a'.repeat(38)}${KEY_EMOJI}`, 39), `${'a'.repeat(38)}${KEY_EMOJI}`)
    // The old cut, slice(0, 39), kept half of the emoji here.
    const name = `${'a'.repeat(38)}${KEY_EMOJI}-and-more`
    assert.ok(!name.slice(0, 39).isWellFormed(), 'what went wrong before')
    assert.equal(cutText(name, 40), `${'a'.repeat(38)}${KEY_EMOJI}…`)
    // A family (ZWJ sequence, 7 code points) and a flag (2) are never split.
    const family = '\u{1F468}\u200D\u{1F469}\u200D\u{1F467}\u200D\u{1F466}'
    assert.equal(cutText(`${'b'.repeat(36)}${family}xyz`, 40), `${'b'.repeat(36)}…`)
    assert.equal(
      cutText(`${'c'.repeat(37)}\u{1F1EB}\u{1F1F7}xyz`, 40),
      `${'c'.repeat(37)}\u{1F1EB}\u{1F1F7}…`,
    )
    assert.equal(cutText('lone \ud83d here', 40), 'lone \uFFFD here')
    for (let length = 30; length < 50; length++) {
      const text = `${'d'.repeat(length)}${KEY_EMOJI}${KEY_EMOJI}tail`
      const cut = cutText(text, 40)
      assert.ok(storable(cut), `at ${length}`)
      assert.ok(codePointLength(cut) <= 40, `at ${length}`)
    }
  })

  test('the built-in engine names similar keys with an emoji at any offset without splitting it', () => {
    for (let at = 30; at < 45; at++) {
      const named = (c: string) =>
        key({ name: `payments-${c.repeat(at)}${KEY_EMOJI}-x`, labels: ['team-pay'], description: c })
      const subject = key({ name: 'payments-subject' })
      const got = suggestBuiltin(subject, { otherKeys: [named('a'), named('b')] })
      const similar = got.find((s) => s.label === 'team-pay')
      assert.ok(similar, `at ${at}`)
      assert.ok(storable(similar.reason), `at ${at}: ${similar.reason}`)
    }
  })

  test('a model reason with a lone surrogate or an emoji at the cut is stored whole', () => {
    assert.equal(cleanReason('the name says \ud83d'), 'the name says \uFFFD')
    const long = cleanReason(`${'r'.repeat(MAX_REASON_LENGTH - 2)}${KEY_EMOJI.repeat(3)}`)
    assert.ok(storable(long))
    assert.equal(codePointLength(long), MAX_REASON_LENGTH)
    assert.ok(long.endsWith(`${KEY_EMOJI}…`))
  })
})

describe('model engine against a local chat-completions server', () => {
  let fake: FakeChatCompletions
  const outbound = createOutboundClient({ allow: createAllowList(['127.0.0.1']) })
  const builtin = createBuiltinEngine()
  /** Every fallback reason any engine in this suite reported (checked for the API key at the end). */
  const allReasons: string[] = []

  before(async () => {
    fake = await startFakeChatCompletions()
  })
  after(async () => {
    await fake.stop()
  })
  beforeEach(() => fake.reset())

  /** A model engine whose fallback is the built-in engine, wrapped to count its calls. */
  function setup(overrides: Partial<ModelEngineOptions> = {}) {
    const reasons: string[] = []
    const fallback = { calls: 0 }
    const engine = createModelEngine({
      baseUrl: fake.baseUrl,
      apiKey: fake.apiKey,
      model: 'gpt-test-mini',
      timeoutMs: 10_000,
      outbound,
      fallback: {
        name: 'builtin',
        suggest: (k, c) => {
          fallback.calls++
          return builtin.suggest(k, c)
        },
      },
      onFallback: (reason) => {
        reasons.push(reason)
        allReasons.push(reason)
      },
      ...overrides,
    })
    return { engine, reasons, fallback }
  }

  const subject = key({
    id: 'key-7d1e9c',
    name: 'payments-prod-signing',
    algorithm: 'ML-DSA-65',
    keyType: 'Signing',
    description: 'Signs payment authorisations',
    labels: ['owner-secret-team', 'tier-1'],
  })
  const context = {
    otherKeys: [
      key({ id: 'other-1', name: 'billing-signing', labels: ['team-payments', 'confidential-label'] }),
      key({ id: 'other-2', name: 'checkout-signing', labels: ['team-payments'] }),
    ],
  }

  test('the request: POST /v1/chat/completions, bearer key, model, system + user messages, strict json_schema, temperature 0', async () => {
    const { engine, reasons } = setup()
    assert.equal(engine.name, 'model')
    await engine.suggest(subject, context)
    assert.deepEqual(reasons, [])
    assert.equal(fake.requests.length, 1)
    const request = fake.requests[0]!
    assert.equal(request.method, 'POST')
    assert.equal(request.path, '/v1/chat/completions')
    assert.equal(request.authorization, `Bearer ${fake.apiKey}`)
    assert.equal(request.contentType, 'application/json')
    const body = request.body as Record<string, unknown>
    assert.deepEqual(Object.keys(body).sort(), ['messages', 'model', 'response_format', 'temperature'])
    assert.equal(body['model'], 'gpt-test-mini')
    assert.equal(body['temperature'], 0)
    const messages = body['messages'] as { role: string; content: string }[]
    assert.deepEqual(
      messages.map((m) => m.role),
      ['system', 'user'],
    )
    assert.ok(messages[0]!.content.length > 100, 'instructions')
    assert.deepEqual(body['response_format'], {
      type: 'json_schema',
      json_schema: { name: 'tag_suggestions', strict: true, schema: RESPONSE_SCHEMA },
    })
    // Strict mode's rules: every object closed and every property required.
    const schema = RESPONSE_SCHEMA as unknown as Record<string, unknown>
    const walk = (node: Record<string, unknown>) => {
      if (node['type'] === 'object') {
        assert.equal(node['additionalProperties'], false)
        const properties = node['properties'] as Record<string, Record<string, unknown>>
        assert.deepEqual([...(node['required'] as string[])].sort(), Object.keys(properties).sort())
        for (const child of Object.values(properties)) walk(child)
      }
      if (node['type'] === 'array') walk(node['items'] as Record<string, unknown>)
    }
    walk(schema)
    // The schema's pattern (no non-capturing group, for constrained decoders) is LABEL_PATTERN.
    const items = RESPONSE_SCHEMA.properties.suggestions.items.properties
    const pattern = new RegExp(items.label.pattern)
    for (const sample of [
      'payments',
      'pci-dss',
      'a1-b2-c3',
      'x',
      '',
      '-a',
      'a-',
      'a--b',
      'A',
      'a_b',
      'a b',
      'é',
    ]) {
      assert.equal(pattern.test(sample), LABEL_PATTERN.test(sample), sample)
    }
  })

  test('only the name, algorithm, key type and description are sent: no labels, ids, other keys', async () => {
    const { engine } = setup()
    await engine.suggest(subject, context)
    const request = fake.requests[0]!
    const messages = (request.body as { messages: { role: string; content: string }[] }).messages
    const facts = JSON.parse(messages.find((m) => m.role === 'user')!.content) as Record<string, unknown>
    assert.deepEqual(Object.keys(facts), ['name', 'algorithm', 'keyType', 'description'])
    assert.deepEqual(facts, {
      name: 'payments-prod-signing',
      algorithm: 'ML-DSA-65',
      keyType: 'Signing',
      description: 'Signs payment authorisations',
    })
    for (const secret of [
      'key-7d1e9c',
      'owner-secret-team',
      'tier-1',
      'other-1',
      'billing-signing',
      'team-payments',
      'confidential-label',
    ]) {
      assert.ok(!request.raw.includes(secret), `${secret} is not sent`)
    }
  })

  test('no API key: no authorization header (the fake refuses; the engine falls back)', async () => {
    const { engine, reasons } = setup({ apiKey: undefined })
    await engine.suggest(subject, context)
    assert.equal(fake.requests[0]!.authorization, undefined)
    assert.deepEqual(reasons, ['http_401'])
  })

  test("a valid answer is used as it is (the fake's suggestions derived from the name)", async () => {
    const { engine, reasons, fallback } = setup()
    const got = await engine.suggest(subject, context)
    assert.deepEqual(got, [
      { label: 'payments', reason: "the name contains 'payments'" },
      { label: 'prod', reason: "the name contains 'prod'" },
      { label: 'signing', reason: "the name contains 'signing'" },
    ])
    assert.deepEqual(reasons, [])
    assert.equal(fallback.calls, 0)
  })

  test('answers are validated: normalised, invalid and repeated labels dropped, reasons cleaned, cut at the maximum', async () => {
    const { engine, reasons } = setup()
    fake.setAnswer([
      { label: 'Payment Processing', reason: 'the name\u0000 contains\n"payments"\u202e' },
      { label: 'customer_data', reason: 'x'.repeat(500) },
      { label: 'tier-1', reason: 'the key has it already' },
      { label: 'payment-processing', reason: 'a duplicate after normalising' },
      { label: 'pci/dss', reason: 'not a label' },
      { label: '--', reason: 'not a label' },
      { label: 'a'.repeat(MAX_LABEL_LENGTH + 1), reason: 'too long' },
      { label: 'no-reason' },
      { label: 'blank-reason', reason: ' \u0007 ' },
      { label: 42, reason: 'not a string' },
      'not an object',
      { label: 'Production', reason: 'the name contains prod', confidence: 0.9 },
      ...Array.from({ length: 10 }, (_, i) => ({ label: `extra-${i}`, reason: `extra ${i}` })),
    ])
    const got = await engine.suggest(subject, context)
    assert.deepEqual(reasons, [])
    assert.equal(got.length, MAX_SUGGESTIONS_PER_KEY)
    assert.deepEqual(labelsOf(got), [
      'payment-processing',
      'customer-data',
      'production',
      'extra-0',
      'extra-1',
      'extra-2',
      'extra-3',
      'extra-4',
    ])
    assert.equal(got[0]!.reason, 'the name contains "payments"')
    assert.equal([...got[1]!.reason].length, MAX_REASON_LENGTH)
    assertContract(subject, got)
  })

  test('a valid empty answer is an answer (no fallback)', async () => {
    const { engine, reasons, fallback } = setup()
    fake.setAnswer([])
    assert.deepEqual(await engine.suggest(subject, context), [])
    assert.deepEqual(reasons, [])
    assert.equal(fallback.calls, 0)
  })

  test('labels the key already has are no violation: nothing left is still an answer', async () => {
    const { engine, reasons } = setup()
    fake.setAnswer([{ label: 'Tier-1', reason: 'tier one' }])
    assert.deepEqual(await engine.suggest(subject, context), [])
    assert.deepEqual(reasons, [])
  })

  test('an answer whose every suggestion breaks the schema falls back (wrong_shape)', async () => {
    const { engine, reasons, fallback } = setup()
    fake.setAnswer([{ label: 'not/valid', reason: 'x' }, { tag: 'payments' }])
    const expected = asFallback(await builtin.suggest(subject, context))
    assert.deepEqual(await engine.suggest(subject, context), expected)
    assert.deepEqual(reasons, ['wrong_shape'])
    assert.equal(fallback.calls, 1)
  })

  const failures: [Parameters<FakeChatCompletions['setMode']>[0], string][] = [
    ['malformed', 'malformed'],
    ['wrong-shape', 'wrong_shape'],
    ['refuse', 'refused'],
    ['http-500', 'http_500'],
    ['http-429', 'http_429'],
    ['unauthorized', 'http_401'],
    ['oversize', 'too_large'],
  ]
  for (const [mode, expectedReason] of failures) {
    test(`${mode}: the built-in engine answers, onFallback('${expectedReason}')`, async () => {
      const { engine, reasons, fallback } = setup()
      fake.setMode(mode)
      const expected = asFallback(await builtin.suggest(subject, context))
      const got = await engine.suggest(subject, context)
      assert.deepEqual(got, expected)
      assert.ok(labelsOf(got).includes('team-payments'), "the fallback saw the context's other keys")
      assert.deepEqual(reasons, [expectedReason])
      assert.equal(fallback.calls, 1)
      assert.equal(fake.requests.length, 1, 'one request, no retry')
    })
  }

  test('a wrong API key: http_401, and the key the server echoes reaches nobody', async () => {
    const { engine, reasons } = setup({ apiKey: 'sk-wrong-0123456789abcdef' })
    await engine.suggest(subject, context)
    assert.deepEqual(reasons, ['http_401'])
  })

  test('a server that never answers: the timeout gives the fallback (structurally, no clock)', async () => {
    const { engine, reasons, fallback } = setup({ timeoutMs: 300 })
    fake.setMode('slow')
    const expected = asFallback(await builtin.suggest(subject, context))
    const got = await engine.suggest(subject, context)
    assert.deepEqual(got, expected)
    assert.deepEqual(reasons, ['timeout'])
    assert.equal(fallback.calls, 1)
    assert.equal(fake.requests.length, 1, 'the request reached the server, which held it')
    // The server answers only now, after the engine gave up: nothing changes.
    fake.releaseSlow()
    assert.deepEqual(reasons, ['timeout'])
  })

  test('nothing listening: unreachable', async () => {
    const closed = http.createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const { port } = closed.address() as AddressInfo
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const { engine, reasons, fallback } = setup({ baseUrl: `http://127.0.0.1:${port}/v1` })
    assert.deepEqual(
      await engine.suggest(subject, context),
      asFallback(await builtin.suggest(subject, context)),
    )
    assert.deepEqual(reasons, ['unreachable'])
    assert.equal(fallback.calls, 1)
  })

  test('a destination the outbound client refuses is never called', async () => {
    const { engine, reasons } = setup({ outbound: createOutboundClient({ allow: createAllowList([]) }) })
    await engine.suggest(subject, context)
    assert.deepEqual(reasons, ['destination_not_allowed'])
    assert.equal(fake.requests.length, 0)
  })

  test('a reason that echoes the API key is dropped', async () => {
    const { engine, reasons } = setup()
    fake.setAnswer([
      { label: 'leaky', reason: `configured with ${fake.apiKey}` },
      { label: 'fine', reason: 'the name says so' },
    ])
    const got = await engine.suggest(subject, context)
    assert.deepEqual(got, [{ label: 'fine', reason: 'the name says so' }])
    assert.deepEqual(reasons, [])
  })

  test('a bad baseUrl is refused at creation, without echoing it', () => {
    assert.throws(
      () => setup({ baseUrl: 'not a url sk-secret-in-url' }),
      (error: Error) => !error.message.includes('sk-secret') && /baseUrl/.test(error.message),
    )
    assert.throws(() => setup({ baseUrl: 'ftp://127.0.0.1/v1' }), /http or https/)
  })

  test('the API key never appears in a fallback reason', () => {
    assert.ok(allReasons.length >= failures.length, 'the fallback tests ran first')
    for (const reason of allReasons) {
      assert.match(reason, /^[a-z0-9_]{1,32}$/, 'a short code')
      assert.ok(!reason.includes(fake.apiKey))
      assert.ok(!reason.includes('sk-'))
    }
  })
})

test('clipText bounds UTF-16 units without keeping half of a surrogate pair, and makes lone ones U+FFFD', () => {
  const emoji = '\u{1F600}'
  const clipped = clipText(`${'a'.repeat(255)}${emoji}`, 256)
  assert.equal(clipped, 'a'.repeat(255))
  assert.ok(clipped.isWellFormed())
  assert.equal(JSON.parse(JSON.stringify({ v: clipped })).v, clipped)
  assert.equal(clipText(`ab${emoji}`, 4), `ab${emoji}`)
  assert.equal(clipText('a\ud83db', 10), 'a\ufffdb')
})
