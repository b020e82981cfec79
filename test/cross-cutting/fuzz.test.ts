import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { connect } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { applicationClient } from '../helpers/endusers.ts'
import { Rng } from '../helpers/rng.ts'
import { startTestService, type TestService } from '../helpers/service.ts'
import { consoleClient, memberSession, signIn } from '../helpers/sign-in.ts'

const FUZZ_REDIRECT = 'http://127.0.0.1:9/callback'
const FUZZ_PORTAL_REDIRECT = 'http://127.0.0.1:9/partner-portal'

/**
 * Fuzz test: thousands of malformed requests against every route the served OpenAPI document
 * lists (so routes added later are fuzzed without touching this file), plus unknown routes and
 * raw byte-level HTTP/1.1 that fetch cannot produce.
 *
 * Invariants: no response is 5xx; every non-2xx answer under /api/v1 is a 4xx JSON body
 * `{error: <snake_case code>, message: string, ...}` with an x-request-id header and no internals;
 * the cases whose outcome is certain get exactly that status and code; the process survives
 * (health answers 200 throughout and at the end) and Object.prototype is not polluted.
 *
 * Deterministic: every case comes from a seeded PRNG. Reproduce a failure with
 * `FUZZ_SEED=<seed> node --test test/cross-cutting/fuzz.test.ts`; each failure names its case number.
 */

const SEED = parseSeed(process.env['FUZZ_SEED'])
/** Minimum number of malformed requests sent with fetch (health probes and raw cases come on top). */
const TARGET_CASES = 2_400
/** Seeded random rounds after the systematic sweep (each round touches every operation). */
const MIN_RANDOM_ROUNDS = 60
const CONCURRENCY = 16
/**
 * The whole fuzz runs in one hook; it grows with every documented operation (about 65 s alone,
 * over 120 s beside another test file on 2 cores), so it has its own bound, not the suite's.
 */
const FUZZ_TIMEOUT_MS = 600_000
// Generous: valid bodies may ask for RSA-4096 keys (~1 s each on 2 cores), queued behind each other.
const REQUEST_TIMEOUT_MS = 60_000
const RAW_TIMEOUT_MS = 5_000
const HEALTH_PROBE_EVERY = 100
const API = '/api/v1'
const HEALTH_PATH = `${API}/health`
/** Set by prototype-poisoning payloads; must never appear on Object.prototype (the server runs in-process). */
const POLLUTION_MARKER = 'fuzzPolluted'

function parseSeed(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 0x5eed_c0de
  const n = Number(raw)
  if (!Number.isInteger(n)) throw new Error(`FUZZ_SEED must be an integer, got ${raw}`)
  return n >>> 0
}

// ---------------------------------------------------------------------------------------------
// Route discovery from the served OpenAPI document

interface JsonSchema {
  type?: string | string[]
  properties?: Record<string, JsonSchema>
  required?: string[]
  items?: JsonSchema
  enum?: unknown[]
  const?: unknown
  format?: string
  minimum?: number
  maximum?: number
  minLength?: number
  maxLength?: number
  minItems?: number
  maxItems?: number
  pattern?: string
  anyOf?: JsonSchema[]
  oneOf?: JsonSchema[]
  allOf?: JsonSchema[]
  default?: unknown
  additionalProperties?: boolean | JsonSchema
  $ref?: string
}

interface OpenApiParameter {
  name: string
  in: string
  required?: boolean
  schema?: JsonSchema
  $ref?: string
}

interface OpenApiOperation {
  parameters?: OpenApiParameter[]
  requestBody?: { required?: boolean; content?: Record<string, { schema?: JsonSchema }> }
  security?: unknown[]
}

interface OpenApiDocument {
  paths?: Record<string, Record<string, OpenApiOperation>>
  components?: Record<string, Record<string, unknown>>
  security?: unknown[]
}

interface Operation {
  method: string
  /** Path template as in the document, e.g. /api/v1/api-keys/{id}. */
  template: string
  pathParams: { name: string; schema: JsonSchema }[]
  query: { name: string; required: boolean; schema: JsonSchema }[]
  body: JsonSchema | undefined
  /** The route's own body limit (`x-body-limit-bytes` on its body schema), if it has one. */
  bodyLimit: number | undefined
  /** The request media types the document lists (application/json, and for some routes raw bytes). */
  mediaTypes: string[]
  isPublic: boolean
  /** A role route (`security: [{AccessToken: []}]`): only a signed-in member gets past authorization. */
  memberOnly: boolean
  /** A partner route (`security` of Partner* schemes only): only a partner's credential gets past authorization. */
  partnerOnly: boolean
  /** A partner portal route (`security: [{PartnerAccessToken: []}]`): only a signed-in partner's token. */
  partnerSessionOnly: boolean
}

function bodyLimitOf(schema: JsonSchema | undefined): number | undefined {
  const limit = (schema as Record<string, unknown> | undefined)?.['x-body-limit-bytes']
  return typeof limit === 'number' ? limit : undefined
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']

function resolveRef<T>(doc: OpenApiDocument, value: T & { $ref?: string }): T {
  let current: unknown = value
  for (let hops = 0; hops < 10; hops++) {
    const ref = (current as { $ref?: unknown }).$ref
    if (typeof ref !== 'string' || !ref.startsWith('#/')) return current as T
    current = ref
      .slice(2)
      .split('/')
      .reduce<unknown>((node, part) => (node as Record<string, unknown> | undefined)?.[part], doc)
    if (current === undefined) throw new Error(`unresolvable $ref ${ref}`)
  }
  return current as T
}

function deref(doc: OpenApiDocument, schema: JsonSchema | undefined): JsonSchema {
  if (!schema) return {}
  const s = resolveRef(doc, schema)
  const out: JsonSchema = { ...s }
  if (s.properties) {
    out.properties = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, deref(doc, v)]))
  }
  if (s.items) out.items = deref(doc, s.items)
  if (s.anyOf) out.anyOf = s.anyOf.map((x) => deref(doc, x))
  if (s.oneOf) out.oneOf = s.oneOf.map((x) => deref(doc, x))
  return out
}

function discoverOperations(doc: OpenApiDocument): Operation[] {
  const ops: Operation[] = []
  for (const [template, item] of Object.entries(doc.paths ?? {})) {
    for (const [method, raw] of Object.entries(item)) {
      if (!HTTP_METHODS.includes(method)) continue
      const op = resolveRef(doc, raw)
      const params = (op.parameters ?? []).map((p) => resolveRef(doc, p))
      const json = op.requestBody?.content?.['application/json']
      const security = op.security ?? doc.security ?? []
      ops.push({
        method: method.toUpperCase(),
        template,
        pathParams: params
          .filter((p) => p.in === 'path')
          .map((p) => ({ name: p.name, schema: deref(doc, p.schema) })),
        query: params
          .filter((p) => p.in === 'query')
          .map((p) => ({ name: p.name, required: p.required === true, schema: deref(doc, p.schema) })),
        body: json ? deref(doc, json.schema) : undefined,
        bodyLimit: bodyLimitOf(json ? deref(doc, json.schema) : undefined),
        mediaTypes: Object.keys(op.requestBody?.content ?? {}),
        isPublic: Array.isArray(security) && security.length === 0,
        memberOnly: JSON.stringify(security) === JSON.stringify([{ AccessToken: [] }]),
        partnerOnly:
          Array.isArray(security) &&
          security.length > 0 &&
          security.every((entry) => Object.keys(entry as object).every((name) => name.startsWith('Partner'))),
        partnerSessionOnly: JSON.stringify(security) === JSON.stringify([{ PartnerAccessToken: [] }]),
      })
    }
  }
  return ops
}

// ---------------------------------------------------------------------------------------------
// Values: valid, wrong-typed and edge, driven by the JSON schemas of the document

function primaryType(s: JsonSchema): string | undefined {
  if (Array.isArray(s.type)) return s.type.find((t) => t !== 'null')
  if (s.type) return s.type
  if (s.properties) return 'object'
  if (s.items) return 'array'
  if (s.enum && s.enum.length > 0) return typeof s.enum[0]
  return undefined
}

function alternative(s: JsonSchema): JsonSchema | undefined {
  const alts = s.anyOf ?? s.oneOf
  return alts?.find((a) => primaryType(a) !== 'null') ?? s.allOf?.[0]
}

function validString(s: JsonSchema, rng: Rng): string {
  switch (s.format) {
    case 'uuid':
      return rng.uuid()
    case 'date-time':
      return '2031-05-06T07:08:09Z'
    case 'date':
      return '2031-05-06'
    case 'email':
      return 'fuzz@example.com'
    case 'uri':
    case 'url':
      return 'https://example.com/fuzz'
  }
  if (s.pattern) {
    const re = new RegExp(s.pattern, 'u')
    for (const candidate of ['1', 'a', 'A', 'abc', 'a1', 'a-b', 'a.b', 'a_b', '1.0', 'AAAA', 'a:b']) {
      if (re.test(candidate)) return candidate
    }
  }
  const min = Math.max(s.minLength ?? 1, 1)
  const max = s.maxLength ?? 64
  return 'fuzz'.padEnd(Math.min(Math.max(min, 4), max), 'z').slice(0, max)
}

function validValue(s: JsonSchema, rng: Rng, depth = 0): unknown {
  if (s.const !== undefined) return s.const
  if (s.enum && s.enum.length > 0) return rng.pick(s.enum)
  const alt = alternative(s)
  if (alt) return validValue(alt, rng, depth)
  switch (primaryType(s)) {
    case 'string':
      return validString(s, rng)
    case 'integer':
    case 'number': {
      if (typeof s.default === 'number') return s.default
      return Math.min(Math.max(s.minimum ?? 1, 1), s.maximum ?? Number.MAX_SAFE_INTEGER)
    }
    case 'boolean':
      return rng.chance(0.5)
    case 'array': {
      const n = Math.min(Math.max(s.minItems ?? 1, 1), s.maxItems ?? 3, 3)
      return Array.from({ length: n }, () =>
        s.items && depth < 5 ? validValue(s.items, rng, depth + 1) : 'x',
      )
    }
    case 'object': {
      const out: Record<string, unknown> = {}
      const required = new Set(s.required ?? [])
      for (const [name, prop] of Object.entries(s.properties ?? {})) {
        if (required.has(name) || rng.chance(0.3)) out[name] = validValue(prop, rng, depth + 1)
      }
      return out
    }
    default:
      return 'fuzz'
  }
}

/** A valid body for the operation, or {} when it declares none. */
function validBody(op: Operation, rng: Rng): Record<string, unknown> {
  const v = op.body ? validValue(op.body, rng) : {}
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {}
}

function matchesType(value: unknown, type: string | undefined): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string'
    case 'integer':
      return Number.isInteger(value)
    case 'number':
      return typeof value === 'number'
    case 'boolean':
      return typeof value === 'boolean'
    case 'array':
      return Array.isArray(value)
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value)
    case 'null':
      return value === null
    default:
      return false
  }
}

const ANY_TYPED_VALUES: readonly unknown[] = [
  'a string',
  '',
  '123',
  'true',
  12345,
  -1,
  0,
  1.5,
  true,
  false,
  null,
  [],
  ['x'],
  [1, 2, 3],
  {},
  { nested: { deeper: true } },
]

function wrongTypedValues(s: JsonSchema): unknown[] {
  const type = primaryType(s)
  const nullable = Array.isArray(s.type) && s.type.includes('null')
  return ANY_TYPED_VALUES.filter((v) => {
    if (v === null && nullable) return false
    if (s.enum) return !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))
    return !matchesType(v, type) && !(type === 'number' && Number.isInteger(v))
  })
}

const EDGE_STRINGS: readonly string[] = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff\ud800',
  '😀'.repeat(50),
  '\u202e\u0645\u0631\u062d\u0628\u0627',
  'e\u0301\u0301\u0301',
  '\r\n\t\v\f',
  "'; DROP TABLE api_keys; --",
  '" OR "1"="1',
  '../../../../etc/passwd',
  '..\\..\\windows\\win.ini',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a log4shell-style payload, not a template
  '${jndi:ldap://127.0.0.1/a}',
  '{{7*7}}',
  '%s%n%x%d',
  '<script>alert(1)</script>',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  'NaN',
  '-0',
  '\uffff\ufffe',
]

const EDGE_DATE_TIMES: readonly string[] = [
  '2030-12-31T23:59:60Z',
  '2016-12-31T23:59:60Z',
  '0000-01-01T00:00:00Z',
  '0001-01-01T00:00:00+01:00',
  '0001-01-01T00:00:00Z',
  '9999-12-31T23:59:59Z',
  '9999-12-31T23:59:59.999999999Z',
  '+275760-09-13T00:00:00Z',
  '1970-01-01T00:00:00Z',
  '2020-02-30T00:00:00Z',
  '2021-02-29T00:00:00Z',
  '2030-01-01T24:00:00Z',
  '2030-01-01T00:00:00+25:00',
  '2030-01-01T00:00:00+23:59',
  '2030-01-01t00:00:00z',
  '2030-01-01',
  '2030-01-01T00:00:00',
  'yesterday',
  '1e10',
  '2030-01-01T00:00:00.0000000000000000000001Z',
]

/** Path segments, already in URL form (the percent-encoding is what is sent). */
const EDGE_PATH_SEGMENTS: readonly string[] = [
  'not-a-uuid',
  '00000000-0000-0000-0000-00000000000G',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  'FFFFFFFF-FFFF-4FFF-AFFF-FFFFFFFFFFFF',
  '00000000000000000000000000000000',
  '{00000000-0000-0000-0000-000000000000}',
  'urn:uuid:00000000-0000-0000-0000-000000000000',
  '00000000-0000-0000-0000-0000000000000',
  '00000000-0000-0000-0000-00000000000',
  ' 00000000-0000-0000-0000-000000000000',
  '00000000-0000-0000-0000-000000000000%20',
  'a'.repeat(199),
  'a'.repeat(201),
  'a'.repeat(1000),
  '0'.repeat(1000),
  'a%2Fb',
  '%2F',
  '..%2F..%2Ftenant',
  '..',
  '%2E%2E',
  '.',
  '...',
  '..;',
  '%00',
  'a%00b',
  '%E0%A4%A',
  '%zz',
  '%',
  '%25',
  '%C0%AF',
  '%FF%FE',
  '%F0%9F%98%80',
  encodeURIComponent("'; DROP TABLE api_keys; --"),
  encodeURIComponent('<script>'),
  '-1',
  '0',
  '1',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  '%7B%7D',
  '%5B%5D',
]

/** Numbers JSON can carry but JavaScript cannot hold exactly: inserted into JSON text verbatim. */
const RAW_NUMBERS: readonly string[] = [
  '1e999',
  '-1e999',
  '1e-999',
  '9'.repeat(400),
  `-${'9'.repeat(400)}`,
  '123456789012345678901234567890',
  '9007199254740993',
  '-0',
  '0.1e-320',
  '1.7976931348623157e308',
  '2E2',
  '1.0',
]

const QUERY_EDGE_VALUES: readonly string[] = [
  '-1',
  '0',
  '-0',
  '1.5',
  '1e3',
  '1e400',
  '0x10',
  '99999999999999999999999',
  '9223372036854775807',
  '9223372036854775808',
  '9999999999999999999',
  '18446744073709551616',
  '00000000000000000001',
  'abc',
  '',
  'NaN',
  'Infinity',
  '-Infinity',
  '%20',
  '%201',
  'true',
  'false',
  'null',
  '[]',
  '%7B%7D',
  '%00',
  'a%00b',
  '%E0%A4%A',
  '%zz',
  '%',
  '%ED%A0%80',
  '%F0%9F%98%80',
  encodeURIComponent("' OR 1=1 --"),
  'a'.repeat(5000),
  '2030-12-31T23%3A59%3A60Z',
  '0000-01-01T00%3A00%3A00Z',
  '0001-01-01T00%3A00%3A00%2B01%3A00',
]

const NON_JSON_CONTENT_TYPES: readonly string[] = [
  'text/plain',
  'text/plain; charset=utf-8',
  'application/xml',
  'text/xml',
  'multipart/form-data; boundary=fuzzboundary',
  'application/x-www-form-urlencoded',
  'application/octet-stream',
  'application/jsonx',
  'application/vnd.api+json',
  'text/json',
  'application/x-json',
  'json',
  'application/',
  ';;;',
  'application/json-patch+json',
]

const UNUSUAL_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD']

/** Bodies that are not JSON at all: each must be 400 invalid_json. */
const BROKEN_JSON: readonly string[] = [
  "{'name':'x'}",
  '{name: "x"}',
  '{"name":"x",}',
  '{"name":"x" "scopes":[]}',
  '{"name":NaN}',
  '{"name":Infinity}',
  '{"name":undefined}',
  '{"name":"\\x41"}',
  '{"name":"\\u12"}',
  '{"name":"unterminated}',
  '{"a":1}}',
  '[1,2,,3]',
  '{"name":01}',
  '{"name":.5}',
  '{"name":+1}',
  '// comment\n{}',
  '{"a":"b"\u0000}',
  '{"a":tru}',
  '{',
  '"',
  'nul',
  '{"name":"x"',
  '{"__proto__":{"a":1}',
  '\u00ff\u00fe{}',
  `{"name":"${'x'.repeat(50_000)}`,
]

const TRAILING_GARBAGE: readonly string[] = [
  'garbage',
  '}',
  ']',
  ',',
  ',{}',
  '{}',
  '\u0000',
  'null',
  '"x"',
  '/* c */',
]

/** Empty bodies with Content-Type application/json: each must be 400 invalid_json. */
const EMPTY_BODIES: readonly string[] = ['', ' ', '\n', '\t\r\n']

/** Legal JSON that is not an object, or has a byte-order mark. */
const ODD_JSON: readonly string[] = [
  '[]',
  '"string"',
  '123',
  'null',
  'true',
  '[{}]',
  '[[]]',
  '""',
  '\ufeff{}',
  '{}',
]

const POISON: readonly string[] = [
  `{"__proto__":{"${POLLUTION_MARKER}":true}}`,
  `{"constructor":{"prototype":{"${POLLUTION_MARKER}":true}}}`,
  `{"__proto__":{"__proto__":{"${POLLUTION_MARKER}":true}}}`,
  `{"x":{"__proto__":{"${POLLUTION_MARKER}":true}}}`,
  `{"x":{"constructor":{"prototype":{"${POLLUTION_MARKER}":true}}}}`,
  `{"\\u005f_proto__":{"${POLLUTION_MARKER}":true}}`,
  `{"prototype":{"${POLLUTION_MARKER}":true}}`,
]

const EXTRA_FIELD_NAMES: readonly string[] = [
  'fuzzUnknownField',
  'id',
  'tenantId',
  'admin',
  'key',
  '',
  ' ',
  'ñ',
  '__proto__x',
]

const ODD_JSON_CONTENT_TYPES: readonly string[] = [
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'APPLICATION/JSON',
  'application/json;;',
  'application/json; boundary=x',
  `application/json; ${'x=y; '.repeat(200)}`,
]

/** Extra query parts, sent as is, for any operation. */
const QUERY_EXTRAS: readonly string[] = [
  'fuzzUnknownParam=1',
  `__proto__[${POLLUTION_MARKER}]=1`,
  `constructor[prototype][${POLLUTION_MARKER}]=1`,
  '__proto__=x',
  '=',
  '==',
  '&&&',
  'a',
  '%zz=1',
  '%00=1',
  `a${'[b]'.repeat(1000)}=1`,
  `${'p'.repeat(3000)}=1`,
  Array.from({ length: 300 }, (_, i) => `fuzz${i}=${i}`).join('&'),
]

/** Suffixes for paths that have no parameter. */
const PATH_SUFFIXES: readonly string[] = [
  '/',
  '//',
  '/.',
  '/%2e%2e',
  ';x=1',
  '%00',
  '/..;/',
  '%20',
  '/x',
  '%2F',
  '.json',
  '~',
  '%E0%A4%A',
]

function queryValuesFor(schema: JsonSchema): string[] {
  return [
    ...QUERY_EDGE_VALUES,
    ...(schema.format === 'date-time' ? EDGE_DATE_TIMES : []).map(encodeLoose),
    ...(schema.format === 'uuid' ? EDGE_PATH_SEGMENTS : []),
    ...EDGE_STRINGS.map(encodeLoose),
    ...wrongTypedValues(schema).map((v) => encodeURIComponent(JSON.stringify(v))),
  ]
}

/** A field value: a JSON value, or a raw JSON token (for what JSON.stringify cannot write). */
type FieldValue = { value: unknown } | { raw: string }

function fieldValuesFor(schema: JsonSchema): FieldValue[] {
  const type = primaryType(schema)
  const values: FieldValue[] = wrongTypedValues(schema).map((value) => ({ value }))
  if (type === 'string' || type === undefined) {
    values.push(...EDGE_STRINGS.map((value) => ({ value })))
    values.push({ value: 'x'.repeat((schema.maxLength ?? 1000) + 1) }, { value: 'x'.repeat(100_000) })
    if (schema.format === 'date-time') values.push(...EDGE_DATE_TIMES.map((value) => ({ value })))
    if (schema.format === 'uuid') values.push(...EDGE_PATH_SEGMENTS.map((value) => ({ value })))
  }
  if (type === 'array' || type === undefined) {
    const item = schema.items ? validValue(schema.items, new Rng(1)) : 'x'
    values.push(
      { value: [] },
      { value: Array.from({ length: 10_000 }, () => item) },
      { value: [item, item] },
      { value: [null] },
      { value: [[]] },
      { value: [{}] },
      { value: ['x'.repeat(10_000)] },
    )
  }
  values.push(...RAW_NUMBERS.map((raw) => ({ raw })), { raw: deepArray(10_000) }, { raw: deepObject(10_000) })
  // A free-form object (a JWK): deep or wide values that pass its shallow checks (its required
  // properties are at every level), so only a bound on the whole value refuses them.
  for (const branch of [schema, ...(schema.anyOf ?? []), ...(schema.oneOf ?? [])]) {
    if (primaryType(branch) !== 'object' || branch.additionalProperties === false) continue
    const shell = validValue(branch, new Rng(2)) as Record<string, unknown>
    const wide = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`w${i}`, i]))
    values.push(
      { raw: deepFreeForm(shell, 10_000) },
      { raw: deepFreeForm(shell, 50) },
      { value: { ...shell, list: Array.from({ length: 50_000 }, () => 'x') } },
      { value: { ...shell, nested: { ...wide } } },
    )
  }
  return values
}

/** JSON text of `shell` holding itself `depth` levels deep under "a" (without recursion). */
function deepFreeForm(shell: Record<string, unknown>, depth: number): string {
  const open = JSON.stringify(shell).slice(0, -1)
  const separator = Object.keys(shell).length > 0 ? ',' : ''
  return `${`${open}${separator}"a":`.repeat(depth)}1${'}'.repeat(depth)}`
}

// ---------------------------------------------------------------------------------------------
// Cases

type KeyKind = 'full' | 'narrow' | 'none' | 'garbage' | 'unknown' | 'revoked' | 'empty'
const UNAUTHENTICATED: ReadonlySet<KeyKind> = new Set(['none', 'garbage', 'unknown', 'revoked', 'empty'])

type Body = string | Uint8Array | (() => string)

interface Expectation {
  status: number
  error?: string
  /** Other acceptable outcomes. */
  also?: readonly { status: number; error: string }[]
  why: string
}

interface FuzzCase {
  id: number
  category: string
  method: string
  /** Path and query as sent (already percent-encoded). */
  target: string
  headers: Record<string, string>
  body?: Body
  keyKind: KeyKind
  /** Exact status (and error code) when the outcome is certain. */
  expect?: Expectation
}

interface Keys {
  /** Used as `Authorization: Bearer` instead of the full key on role routes (an owner's token). */
  member: string
  full: string
  narrow: string
  revoked: string
  /**
   * Partner keys, used in turn as `Authorization: Bearer` instead of the full key on partner
   * routes: each key may make 100 requests a minute, and the fuzz makes more than that.
   */
  partners: string[]
  /** Partner portal access tokens, used in turn on the routes only a signed-in partner may call. */
  partnerSessions: string[]
}

const JSON_CT: Readonly<Record<string, string>> = { 'content-type': 'application/json' }
const INVALID_JSON: Expectation = { status: 400, error: 'invalid_json', why: 'the body is not JSON' }

/** A JSON text in which `"__RAW_<n>__"` string placeholders are replaced by raw tokens. */
function jsonWithRaw(value: unknown, raws: string[]): string {
  return JSON.stringify(value).replace(/"__RAW_(\d+)__"/g, (_, i: string) => raws[Number(i)]!)
}

function withField(base: Record<string, unknown>, field: string, v: FieldValue): Body {
  if ('raw' in v) return jsonWithRaw({ ...base, [field]: '__RAW_0__' }, [v.raw])
  const text = () => JSON.stringify({ ...base, [field]: v.value })
  return typeof v.value === 'string' && v.value.length > 50_000 ? text : text()
}

function deepArray(depth: number): string {
  return `${'['.repeat(depth)}${']'.repeat(depth)}`
}

function deepObject(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`
}

/** encodeURIComponent, but a lone surrogate is sent as its WTF-8 bytes instead of throwing. */
function encodeLoose(value: string): string {
  try {
    return encodeURIComponent(value)
  } catch {
    return value.replace(/[\s\S]/gu, (ch) => {
      const code = ch.codePointAt(0)!
      if (code < 0xd800 || code > 0xdfff) return encodeURIComponent(ch)
      const bytes = [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
      return bytes.map((b) => `%${b.toString(16).toUpperCase()}`).join('')
    })
  }
}

/** True when the path is well-formed UTF-8 percent-encoding. */
function wellFormedPath(target: string): boolean {
  try {
    decodeURIComponent(target.split('?')[0]!)
    return true
  } catch {
    return false
  }
}

function isUnderApi(target: string): boolean {
  const path = new URL(target, 'http://x').pathname
  return path === API || path.startsWith(`${API}/`)
}

const takesBody = (method: string) => method !== 'GET' && method !== 'HEAD'

interface CaseOptions {
  category: string
  method: string
  target: string
  keyKind: KeyKind
  headers?: Record<string, string>
  body?: Body
  /** Applies only when the full-scope key is used (other keys stop at authentication). */
  expectWithFullKey?: Expectation
}

/**
 * Builds the cases: first a sweep that sends every edge value of every list to every parameter
 * and field of every operation (so known traps are always hit), then seeded random combinations.
 */
class CaseFactory {
  private nextId = 0
  readonly cases: FuzzCase[] = []
  private readonly methodsByTemplate = new Map<string, Set<string>>()
  private readonly rng: Rng
  private readonly ops: Operation[]
  private readonly keys: Keys
  private readonly publicRoutes: readonly RegExp[]
  private readonly bodyLimit: number
  /** Ids of resources that exist, per path parameter name: half the fills use one of them. */
  private readonly existingIds: Readonly<Record<string, readonly string[]>>

  constructor(
    rng: Rng,
    ops: Operation[],
    keys: Keys,
    publicRoutes: readonly RegExp[],
    bodyLimit: number,
    existingIds: Readonly<Record<string, readonly string[]>> = {},
  ) {
    this.existingIds = existingIds
    this.rng = rng
    this.ops = ops
    this.keys = keys
    this.publicRoutes = publicRoutes
    this.bodyLimit = bodyLimit
    for (const op of ops) {
      const set = this.methodsByTemplate.get(op.template) ?? new Set<string>()
      set.add(op.method)
      if (op.method === 'GET') set.add('HEAD')
      this.methodsByTemplate.set(op.template, set)
    }
  }

  build(target: number, minRounds: number): FuzzCase[] {
    for (const op of this.ops) this.sweep(op)
    for (let round = 0; round < minRounds || this.cases.length < target; round++) this.randomRound(round)
    return this.cases
  }

  // -- helpers -------------------------------------------------------------------------------

  private keyHeader(kind: KeyKind): string | undefined {
    switch (kind) {
      case 'full':
        return this.keys.full
      case 'narrow':
        return this.keys.narrow
      case 'revoked':
        return this.keys.revoked
      case 'none':
        return undefined
      case 'empty':
        return ''
      case 'unknown':
        return `kms_${this.rng.fromAlphabet(52, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789')}`
      case 'garbage':
        return this.rng.headerGarbage(this.rng.pick([1, 8, 56, 200, 4000]))
    }
  }

  /** Mostly the full-scope key, so that validation behind authentication is exercised. */
  private mostlyValidKey(): KeyKind {
    const r = this.rng.int(100)
    if (r < 88) return 'full'
    if (r < 92) return 'narrow'
    if (r < 95) return 'none'
    if (r < 98) return 'garbage'
    return 'unknown'
  }

  private fillPath(op: Operation, override?: { name: string; segment: string }): string {
    return op.template.replace(/\{([^}]+)\}/g, (_, name: string) => {
      if (override && override.name === name) return override.segment
      const existing = this.existingIds[name]
      if (existing?.length && this.rng.chance(0.5)) return this.rng.pick(existing)
      const p = op.pathParams.find((x) => x.name === name)
      return encodeURIComponent(String(p ? validValue(p.schema, this.rng) : 'x'))
    })
  }

  /** A valid query for the operation (parameters with defaults are often left out). */
  private validQuery(op: Operation, skip?: string): string[] {
    const parts: string[] = []
    for (const q of op.query) {
      if (q.name === skip) continue
      if (q.schema.default !== undefined && !this.rng.chance(0.3)) continue
      if (!q.required && q.schema.default === undefined && !this.rng.chance(0.3)) continue
      parts.push(
        `${encodeURIComponent(q.name)}=${encodeURIComponent(String(validValue(q.schema, this.rng)))}`,
      )
    }
    return parts
  }

  private withQuery(path: string, parts: string[]): string {
    return parts.length > 0 ? `${path}?${parts.join('&')}` : path
  }

  private add(o: CaseOptions): void {
    const headers: Record<string, string> = { ...o.headers }
    const key = this.keyHeader(o.keyKind)
    // Role routes refuse API keys: their validation is reached with an owner's access token.
    if (o.keyKind === 'full' && this.isMemberRoute(o.method, o.target))
      headers['authorization'] = `Bearer ${this.keys.member}`
    // Partner portal routes take a signed-in partner's token; other partner routes partner keys.
    else if (o.keyKind === 'full' && this.isPartnerRoute(o.method, o.target, true))
      headers['authorization'] =
        `Bearer ${this.keys.partnerSessions[this.nextId % this.keys.partnerSessions.length]}`
    else if (o.keyKind === 'full' && this.isPartnerRoute(o.method, o.target))
      headers['authorization'] = `Bearer ${this.keys.partners[this.nextId % this.keys.partners.length]}`
    else if (key !== undefined) headers['x-api-key'] = key
    const c: FuzzCase = {
      id: this.nextId++,
      category: o.category,
      method: o.method,
      target: o.target,
      headers,
      keyKind: o.keyKind,
      ...(o.body !== undefined ? { body: o.body } : {}),
    }
    const expect = this.authExpectation(c) ?? (o.keyKind === 'full' ? o.expectWithFullKey : undefined)
    if (expect) c.expect = expect
    this.cases.push(c)
  }

  private isPartnerRoute(method: string, target: string, sessionOnly = false): boolean {
    if (!wellFormedPath(target)) return false
    const path = new URL(target, 'http://x').pathname
    return this.ops.some(
      (op) =>
        (sessionOnly ? op.partnerSessionOnly : op.partnerOnly) &&
        op.method === method &&
        routePattern(op.template).test(path),
    )
  }

  private isMemberRoute(method: string, target: string): boolean {
    if (!wellFormedPath(target)) return false
    const path = new URL(target, 'http://x').pathname
    return this.ops.some(
      (op) => op.memberOnly && op.method === method && routePattern(op.template).test(path),
    )
  }

  /** Authentication runs before routing and body handling under /api/v1, except on public paths. */
  private authExpectation(c: FuzzCase): Expectation | undefined {
    if (!UNAUTHENTICATED.has(c.keyKind) || !isUnderApi(c.target) || !wellFormedPath(c.target))
      return undefined
    const path = new URL(c.target, 'http://x').pathname
    if (this.publicRoutes.some((route) => route.test(path))) return undefined
    return { status: 401, error: 'unauthorized', why: `no valid API key (${c.keyKind})` }
  }

  private unusualMethods(op: Operation): string[] {
    const existing = this.methodsByTemplate.get(op.template) ?? new Set<string>()
    return UNUSUAL_METHODS.filter((m) => !existing.has(m))
  }

  // -- case shapes -----------------------------------------------------------------------------

  private bodyCase(
    op: Operation,
    category: string,
    body: Body,
    keyKind: KeyKind,
    extra: Partial<CaseOptions> = {},
  ) {
    this.add({
      category,
      method: op.method,
      target: this.withQuery(this.fillPath(op), this.validQuery(op)),
      headers: JSON_CT,
      body,
      keyKind,
      ...extra,
    })
  }

  private queryCase(
    op: Operation,
    category: string,
    skip: string | undefined,
    extra: string[],
    keyKind: KeyKind,
  ) {
    const body = takesBody(op.method) ? JSON.stringify(validBody(op, this.rng)) : undefined
    this.add({
      category,
      method: op.method,
      target: this.withQuery(this.fillPath(op), [...this.validQuery(op, skip), ...extra]),
      headers: body !== undefined ? JSON_CT : {},
      ...(body !== undefined ? { body } : {}),
      keyKind,
    })
  }

  private pathCase(op: Operation, target: string, keyKind: KeyKind, expectWithFullKey?: Expectation) {
    const body = takesBody(op.method) ? JSON.stringify(validBody(op, this.rng)) : undefined
    this.add({
      category: 'path',
      method: op.method,
      target,
      keyKind,
      headers: body !== undefined ? JSON_CT : {},
      ...(body !== undefined ? { body } : {}),
      ...(expectWithFullKey ? { expectWithFullKey } : {}),
    })
  }

  private pathParamCase(op: Operation, name: string, segment: string, keyKind: KeyKind) {
    const param = op.pathParams.find((p) => p.name === name)
    const simpleNonUuid =
      param?.schema.format === 'uuid' &&
      /^[A-Za-z0-9-]{1,150}$/.test(segment) &&
      !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(segment)
    const expect: Expectation | undefined = simpleNonUuid
      ? { status: 400, error: 'validation_failed', why: `path parameter ${name}=${segment} is not a UUID` }
      : undefined
    this.pathCase(op, this.fillPath(op, { name, segment }), keyKind, expect)
  }

  private methodCase(op: Operation, method: string, keyKind: KeyKind, withBody: boolean) {
    const body = withBody && takesBody(method) ? JSON.stringify(validBody(op, this.rng)) : undefined
    // OPTIONS is left free (a CORS plugin may answer it); HEAD has no body to check.
    const certain = body === undefined && method !== 'OPTIONS' && method !== 'HEAD'
    this.add({
      category: 'unusual-method',
      method,
      target: this.fillPath(op),
      keyKind,
      headers: body !== undefined ? JSON_CT : {},
      ...(body !== undefined ? { body } : {}),
      ...(certain
        ? {
            expectWithFullKey: {
              status: 404,
              error: 'not_found',
              // Authorization runs before routing: a method that needs a scope no key can hold is refused.
              // A static segment (keys/import) also matches its parameterised sibling (keys/{keyId}),
              // whose validation refuses it as a malformed id.
              also: [
                { status: 403, error: 'insufficient_scope' },
                { status: 400, error: 'validation_failed' },
              ],
              why: `${op.template} has no ${method}`,
            },
          }
        : {}),
    })
  }

  private nonJsonBody(ct: string, base: Record<string, unknown>): string {
    if (ct.startsWith('multipart')) {
      return '--fuzzboundary\r\nContent-Disposition: form-data; name="name"\r\n\r\nx\r\n--fuzzboundary--\r\n'
    }
    if (ct.includes('xml'))
      return '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>'
    if (ct.includes('urlencoded')) return 'name=x&scopes=audit:read'
    return JSON.stringify(base)
  }

  private limitOf(op: Operation): number {
    return op.bodyLimit ?? this.bodyLimit
  }

  private oversized(op: Operation, base: Record<string, unknown>, extra: number): () => string {
    const size = this.limitOf(op) + extra
    return () =>
      `${JSON.stringify(base).slice(0, -1)}${Object.keys(base).length > 0 ? ',' : ''}"fuzzPadding":"${'p'.repeat(size)}"}`
  }

  private tooLarge(op: Operation): Expectation {
    return { status: 413, error: 'payload_too_large', why: `a body above the ${this.limitOf(op)}-byte limit` }
  }

  /** 415, unless the document says the route takes that media type (then any 4xx will do). */
  private unsupported(op: Operation, ct: string): Expectation | undefined {
    if (op.mediaTypes.includes(ct.split(';')[0]!.trim().toLowerCase())) return undefined
    return { status: 415, error: 'unsupported_media_type', why: `Content-Type ${ct}` }
  }

  // -- sweep: every edge value of every list, once ----------------------------------------------

  private sweep(op: Operation): void {
    for (const q of op.query) {
      for (const value of queryValuesFor(q.schema)) {
        this.queryCase(op, 'query-value', q.name, [`${encodeURIComponent(q.name)}=${value}`], 'full')
      }
      const n = encodeURIComponent(q.name)
      for (const odd of [`${n}=1&${n}=2`, `${n}[]=1`, `${n}[a]=1`, `${n}[__proto__][x]=1`, n, `${n}=`]) {
        this.queryCase(op, 'query-shape', q.name, [odd], 'full')
      }
    }
    for (const extra of QUERY_EXTRAS) this.queryCase(op, 'query-extra', undefined, [extra], 'full')

    for (const p of op.pathParams) {
      for (const segment of EDGE_PATH_SEGMENTS) {
        this.pathParamCase(op, p.name, segment, 'full')
        this.pathParamCase(op, p.name, segment, 'none')
      }
    }
    if (op.pathParams.length === 0) {
      for (const suffix of PATH_SUFFIXES) this.pathCase(op, this.fillPath(op) + suffix, 'full')
    }
    for (const method of this.unusualMethods(op)) {
      this.methodCase(op, method, 'full', false)
      this.methodCase(op, method, 'none', false)
    }
    for (const keyKind of ['none', 'empty', 'garbage', 'unknown', 'revoked', 'narrow'] as const) {
      this.queryCase(op, 'auth', undefined, [], keyKind)
    }
    if (!takesBody(op.method)) return

    const base = validBody(op, this.rng)
    for (const [field, schema] of Object.entries(op.body?.properties ?? {})) {
      for (const v of fieldValuesFor(schema))
        this.bodyCase(op, 'field-value', withField(base, field, v), 'full')
      const without = { ...base }
      delete without[field]
      this.bodyCase(op, 'missing-field', JSON.stringify(without), 'full')
    }
    for (const broken of BROKEN_JSON) {
      this.bodyCase(op, 'json-syntax', broken, 'full', { expectWithFullKey: INVALID_JSON })
    }
    const text = JSON.stringify(base)
    for (let cut = 0; cut < text.length; cut += Math.max(1, Math.floor(text.length / 12))) {
      this.bodyCase(op, 'json-truncated', text.slice(0, cut), 'full', { expectWithFullKey: INVALID_JSON })
    }
    for (const garbage of TRAILING_GARBAGE) {
      this.bodyCase(op, 'json-trailing-garbage', text + garbage, 'full', { expectWithFullKey: INVALID_JSON })
    }
    for (const empty of EMPTY_BODIES) {
      this.bodyCase(op, 'empty-body', empty, 'full', { expectWithFullKey: INVALID_JSON })
    }
    for (const odd of ODD_JSON) this.bodyCase(op, 'odd-json', odd, 'full')
    for (const poison of POISON) {
      this.bodyCase(op, 'json-prototype-poisoning', poison, 'full')
      this.bodyCase(op, 'json-prototype-poisoning', `${poison.slice(0, -1)},${text.slice(1)}`, 'full')
    }
    for (const deep of [deepArray(10_000), deepObject(10_000), deepArray(50_000)]) {
      this.bodyCase(op, 'json-deep-nesting', deep, 'full')
    }
    for (const name of EXTRA_FIELD_NAMES) {
      this.bodyCase(op, 'unknown-field', JSON.stringify({ ...base, [name]: 1 }), 'full')
    }
    for (const ct of NON_JSON_CONTENT_TYPES) {
      this.bodyCase(op, 'content-type-wrong', this.nonJsonBody(ct, base), 'full', {
        headers: { 'content-type': ct },
        expectWithFullKey: this.unsupported(op, ct),
      })
    }
    this.bodyCase(op, 'content-type-missing', new TextEncoder().encode(text), 'full', {
      headers: {},
      expectWithFullKey: this.unsupported(op, '(none)'),
    })
    for (const ct of ODD_JSON_CONTENT_TYPES) {
      this.bodyCase(op, 'content-type-params', text, 'full', { headers: { 'content-type': ct } })
    }
    for (const extra of [1, 1024 * 1024]) {
      this.bodyCase(op, 'oversized-body', this.oversized(op, base, extra), 'full', {
        expectWithFullKey: this.tooLarge(op),
      })
    }
    this.bodyCase(op, 'oversized-body', this.oversized(op, base, 1), 'none')
    this.bodyCase(op, 'valid-body', text, 'full')
  }

  // -- random combinations ---------------------------------------------------------------------

  private randomRound(round: number): void {
    const rng = this.rng
    for (const op of this.ops) {
      if (takesBody(op.method)) {
        this.randomBody(op, (round * 2) % 12)
        this.randomBody(op, (round * 2 + 1) % 12)
      }
      this.randomQuery(op)
      if (op.pathParams.length > 0) {
        this.pathParamCase(
          op,
          rng.pick(op.pathParams).name,
          rng.pick(EDGE_PATH_SEGMENTS),
          this.mostlyValidKey(),
        )
      } else {
        this.pathCase(op, this.fillPath(op) + rng.pick(PATH_SUFFIXES), this.mostlyValidKey())
      }
      const methods = this.unusualMethods(op)
      if (methods.length > 0) this.methodCase(op, rng.pick(methods), this.mostlyValidKey(), rng.chance(0.5))
      const authKind = rng.pick<KeyKind>([
        'none',
        'garbage',
        'garbage',
        'unknown',
        'revoked',
        'empty',
        'narrow',
      ])
      this.queryCase(op, 'auth', undefined, [], authKind)
      if (round % 2 === 0) this.randomHeaders(op)
    }
    this.randomUnknownRoute()
    this.randomUnknownRoute()
  }

  private randomBody(op: Operation, variant: number): void {
    const rng = this.rng
    const keyKind = this.mostlyValidKey()
    const base = validBody(op, rng)
    const text = JSON.stringify(base)
    const fields = Object.entries(op.body?.properties ?? {})
    const [field, schema] = fields.length > 0 ? rng.pick(fields) : ['anyField', {}]
    switch (variant) {
      case 0:
        this.bodyCase(op, 'json-truncated', text.slice(0, rng.int(text.length)), keyKind, {
          expectWithFullKey: INVALID_JSON,
        })
        return
      case 1:
        this.bodyCase(op, 'json-syntax', rng.pick(BROKEN_JSON), keyKind, {
          expectWithFullKey: INVALID_JSON,
        })
        return
      case 2:
        this.bodyCase(op, 'json-trailing-garbage', text + rng.pick(TRAILING_GARBAGE), keyKind, {
          expectWithFullKey: INVALID_JSON,
        })
        return
      case 3: {
        const depth = rng.pick([1_000, 10_000, 30_000])
        const deep = rng.chance(0.5) ? deepArray(depth) : deepObject(depth)
        const body = rng.chance(0.5) ? deep : jsonWithRaw({ ...base, [field]: '__RAW_0__' }, [deep])
        this.bodyCase(op, 'json-deep-nesting', body, keyKind)
        return
      }
      case 4:
        this.bodyCase(
          op,
          'json-prototype-poisoning',
          `${rng.pick(POISON).slice(0, -1)},${text.slice(1)}`,
          keyKind,
        )
        return
      case 5: {
        const ct = rng.pick(NON_JSON_CONTENT_TYPES)
        this.bodyCase(op, 'content-type-wrong', this.nonJsonBody(ct, base), keyKind, {
          headers: { 'content-type': ct },
          expectWithFullKey: this.unsupported(op, ct),
        })
        return
      }
      case 6: {
        const extra = { ...base, [rng.pick(EXTRA_FIELD_NAMES)]: rng.pick(ANY_TYPED_VALUES) }
        this.bodyCase(op, 'unknown-field', JSON.stringify(extra), keyKind)
        return
      }
      case 7:
      case 8:
        this.bodyCase(op, 'field-value', withField(base, field, rng.pick(fieldValuesFor(schema))), keyKind)
        return
      case 9: {
        const body = { ...base }
        for (const name of Object.keys(body)) if (rng.chance(0.5)) delete body[name]
        this.bodyCase(op, 'missing-field', JSON.stringify(body), keyKind)
        return
      }
      case 10:
        this.bodyCase(op, 'oversized-body', this.oversized(op, base, rng.pick([1, 4096, 300_000])), keyKind, {
          expectWithFullKey: this.tooLarge(op),
        })
        return
      default: {
        // Two mutations at once: a wrong-typed field and an unknown field, both in one body.
        const wrong = wrongTypedValues(schema)
        const value = wrong.length > 0 ? rng.pick(wrong) : null
        const body = { ...base, [field]: value, [rng.pick(EXTRA_FIELD_NAMES)]: rng.pick(ANY_TYPED_VALUES) }
        this.bodyCase(op, 'field-value', JSON.stringify(body), keyKind)
        return
      }
    }
  }

  private randomQuery(op: Operation): void {
    const rng = this.rng
    const keyKind = this.mostlyValidKey()
    if (op.query.length === 0 || rng.chance(0.2)) {
      this.queryCase(op, 'query-extra', undefined, [rng.pick(QUERY_EXTRAS)], keyKind)
      return
    }
    // Several parameters wrong at once.
    const chosen = op.query.filter(() => rng.chance(0.5))
    if (chosen.length === 0) chosen.push(rng.pick(op.query))
    const parts = chosen.map((q) => `${encodeURIComponent(q.name)}=${rng.pick(queryValuesFor(q.schema))}`)
    this.queryCase(op, 'query-value', undefined, parts, keyKind)
  }

  private randomHeaders(op: Operation): void {
    const rng = this.rng
    const headers: Record<string, string> = takesBody(op.method) ? { ...JSON_CT } : {}
    switch (rng.int(7)) {
      case 0:
        headers['x-request-id'] = rng.headerGarbage(rng.pick([0, 1, 129, 500, 4000]))
        break
      case 1:
        headers['accept'] = rng.pick(['application/xml', 'text/html', '*/*;q=0', 'x/y, */*', ''])
        break
      case 2:
        headers['accept-version'] = rng.pick(['1.x', '*', 'x', '999.0.0'])
        break
      case 3:
        headers['x-forwarded-for'] = rng.headerGarbage(64)
        break
      case 4:
        headers['x-fuzz-big'] = 'h'.repeat(8_000)
        break
      case 5:
        for (let i = 0; i < 80; i++) headers[`x-fuzz-${i}`] = rng.headerGarbage(20)
        break
      default:
        if (takesBody(op.method))
          headers['content-encoding'] = rng.pick(['gzip', 'br', 'deflate', 'identity, gzip', 'x-fuzz'])
    }
    const body = takesBody(op.method) ? JSON.stringify(validBody(op, rng)) : undefined
    this.add({
      category: 'headers',
      method: op.method,
      target: this.withQuery(this.fillPath(op), this.validQuery(op)),
      headers,
      keyKind: this.mostlyValidKey(),
      ...(body !== undefined ? { body } : {}),
    })
  }

  private randomUnknownRoute(): void {
    const rng = this.rng
    const known =
      this.ops.length > 0 ? rng.pick(this.ops).template.replace(/\{[^}]+\}/g, () => rng.uuid()) : API
    const path = rng.pick([
      `${API}/fuzz-${rng.fromAlphabet(8, 'abcdefghijklmnopqrstuvwxyz')}`,
      `${API}/`,
      API,
      `${API}//`,
      `${known}/fuzz`,
      `${known}/${rng.uuid()}/${rng.uuid()}`,
      `${known}/`,
      known.toUpperCase(),
      `${API}/${'x/'.repeat(100)}`,
      `${API}/${'y'.repeat(1000)}`,
      `${API}/%E0%A4%A`,
      `${API}/%zz`,
      `${API}/..%2F..%2Fetc%2Fpasswd`,
      `${API}/openapi.json/x`,
      `${API}/docs`,
      `${API}/health/x`,
      `/api/v2${known.slice(API.length)}`,
      '/api',
      '/',
      '/fuzz',
      '/docs/fuzz',
      '/docs/static/..%2F..%2Fpackage.json',
      '/.env',
      '/%00',
    ])
    const method = rng.pick(UNUSUAL_METHODS)
    const withBody = takesBody(method) && rng.chance(0.5)
    const body = withBody ? rng.pick(['{}', '{"a":', '<x/>', deepArray(10_000)]) : undefined
    this.add({
      category: 'unknown-route',
      method,
      target: path,
      keyKind: this.mostlyValidKey(),
      headers: withBody
        ? { 'content-type': rng.pick(['application/json', 'application/xml', 'text/plain']) }
        : {},
      ...(body !== undefined ? { body } : {}),
    })
  }
}

// ---------------------------------------------------------------------------------------------
// Sending and checking

interface Outcome {
  status?: number
  headers?: Headers
  text?: string
  transportError?: string
}

async function send(baseUrl: string, c: FuzzCase): Promise<Outcome> {
  const body = typeof c.body === 'function' ? c.body() : c.body
  try {
    const response = await fetch(new URL(c.target, baseUrl), {
      method: c.method,
      headers: c.headers,
      ...(body !== undefined ? { body } : {}),
      redirect: 'manual',
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    })
    const text = await response.text()
    return { status: response.status, headers: response.headers, text }
  } catch (error) {
    const e = error as Error & { cause?: unknown }
    return { transportError: `${e.name}: ${e.message}${e.cause ? ` (${String(e.cause)})` : ''}` }
  }
}

interface Violation {
  kind: 'no-response' | '5xx' | 'error-format' | 'expectation'
  reason: string
  c: FuzzCase
  outcome: Outcome
}

const SNAKE_CASE = /^[a-z][a-z0-9_]*$/
const INTERNALS = [/node_modules/, /\bat .+:\d+:\d+/, /\/work\//, /\bsrc\/[\w/-]+\.ts\b/, /\bFST_[A-Z_]+/]

function contentTypeOf(c: FuzzCase): string {
  return c.headers['content-type'] ?? '(none)'
}

function describeCase(c: FuzzCase): string {
  const body = typeof c.body === 'function' ? '<generated oversized/huge body>' : c.body
  const bodyText =
    body === undefined
      ? '-'
      : body instanceof Uint8Array
        ? `<${body.length} bytes>`
        : `${JSON.stringify(body.slice(0, 120))}${body.length > 120 ? `…(${body.length} chars)` : ''}`
  const target = c.target.length > 200 ? `${c.target.slice(0, 200)}…(${c.target.length} chars)` : c.target
  return `#${c.id} [${c.category}] ${c.method} ${target} key=${c.keyKind} content-type=${contentTypeOf(c)} body=${bodyText}`
}

function check(c: FuzzCase, o: Outcome): Violation[] {
  const out: Violation[] = []
  const v = (kind: Violation['kind'], reason: string) => out.push({ kind, reason, c, outcome: o })
  if (o.status === undefined || o.headers === undefined) {
    v('no-response', `no response: ${o.transportError}`)
    return out
  }
  const status = o.status
  if (status >= 500) v('5xx', `status ${status}`)
  const path = new URL(c.target, 'http://x').pathname
  const underApi = path === API || path.startsWith(`${API}/`)
  if (underApi) {
    // All format problems of one response are one violation, so the report stays readable.
    const problems: string[] = []
    if (!o.headers.get('x-request-id')) problems.push('no x-request-id header')
    if (status < 200 || status >= 300) {
      if (status < 400) problems.push(`non-2xx status ${status} is not 4xx`)
      if (c.method !== 'HEAD') {
        const ct = o.headers.get('content-type') ?? ''
        if (!/^application\/json\b/.test(ct)) problems.push(`content-type "${ct}" is not application/json`)
        let parsed: unknown
        try {
          parsed = JSON.parse(o.text ?? '')
        } catch {
          parsed = undefined
        }
        const obj = parsed as Record<string, unknown> | undefined
        if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) {
          problems.push('body is not a JSON object')
        } else {
          if (typeof obj['error'] !== 'string') problems.push('body.error is not a string')
          else if (!SNAKE_CASE.test(obj['error']))
            problems.push(`error "${obj['error']}" is not a snake_case code`)
          if (typeof obj['message'] !== 'string') problems.push('body.message is not a string')
          if ('stack' in obj) problems.push('body has a stack')
        }
        for (const re of INTERNALS) if (re.test(o.text ?? '')) problems.push(`body reveals internals (${re})`)
      }
    }
    if (problems.length > 0) v('error-format', problems.join('; '))
  }
  if (c.expect) {
    const e = c.expect
    let code: unknown
    try {
      code = (JSON.parse(o.text ?? '') as { error?: unknown }).error
    } catch {
      code = undefined
    }
    const allowed = [{ status: e.status, error: e.error }, ...(e.also ?? [])]
    const ok = allowed.some(
      (a) => a.status === status && (a.error === undefined || c.method === 'HEAD' || a.error === code),
    )
    if (!ok) {
      const wanted = allowed.map((a) => `${a.status}${a.error ? ` ${a.error}` : ''}`).join(' or ')
      v('expectation', `expected ${wanted} (${e.why}), got ${status} ${String(code)}`)
    }
    if (e.status === 401 && status === 401 && !o.headers.get('www-authenticate'))
      v('expectation', '401 without WWW-Authenticate')
  }
  return out
}

async function runPool<T>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!
      await fn(item)
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker))
}

/** Examples printed per kind of violation (FUZZ_EXAMPLES to see more). */
const EXAMPLES = Number(process.env['FUZZ_EXAMPLES'] ?? 3)

/** A path template such as /api/v1/api-keys/{id} as a pattern for concrete paths. */
function routePattern(template: string): RegExp {
  const escaped = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&')
  return new RegExp(`^${escaped.replace(/\{[^}]+\}/g, '[^/]+')}$`)
}

/** The documented route a target falls on, for grouping violations. */
function routeOf(target: string, ops: readonly Operation[]): string {
  const path = new URL(target, 'http://x').pathname
  return ops.find((op) => routePattern(op.template).test(path))?.template ?? 'other path'
}

function report(violations: Violation[], title: string, ops: readonly Operation[]): string {
  const byReason = new Map<string, Violation[]>()
  for (const x of violations) {
    const route = `${x.c.method} ${routeOf(x.c.target, ops)}`
    const key = `[${x.c.category}] ${route}: ${x.reason.replace(/\d{3,}/g, 'N')}`
    byReason.set(key, [...(byReason.get(key) ?? []), x])
  }
  const lines = [
    `${title}: ${violations.length} violation(s), seed=${SEED} (reproduce: FUZZ_SEED=${SEED} node --test test/cross-cutting/fuzz.test.ts)`,
  ]
  for (const [reason, list] of byReason) {
    lines.push(`  ${list.length} x ${reason}`)
    for (const x of list.slice(0, EXAMPLES)) {
      const excerpt = (x.outcome.text ?? '').slice(0, 200)
      lines.push(`      ${describeCase(x.c)}\n        -> ${x.outcome.status ?? 'no status'} ${excerpt}`)
    }
  }
  return lines.join('\n')
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP/1.1 (what fetch cannot send)

interface RawCase {
  name: string
  payload: Buffer
  /** Half-close after writing, so a short body is seen as ended rather than awaited. */
  endAfterWrite?: boolean
}

function rawRequest(
  baseUrl: string,
  payload: Buffer,
  endAfterWrite: boolean,
): Promise<{ status?: number; head: string; error?: string }> {
  const url = new URL(baseUrl)
  return new Promise((resolve) => {
    let received = Buffer.alloc(0)
    let settled = false
    const finish = (error?: string) => {
      if (settled) return
      settled = true
      socket.destroy()
      const head = received.toString('latin1').split('\r\n\r\n')[0] ?? ''
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(head)
      resolve({
        ...(match ? { status: Number(match[1]) } : {}),
        head: head.slice(0, 300),
        ...(error ? { error } : {}),
      })
    }
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(payload)
      if (endAfterWrite) socket.end()
    })
    socket.setTimeout(RAW_TIMEOUT_MS, () => finish(`no response within ${RAW_TIMEOUT_MS} ms`))
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      if (received.includes('\r\n\r\n')) finish()
    })
    socket.on('error', (e) => finish(`socket error: ${e.message}`))
    socket.on('close', () => finish(received.length === 0 ? 'closed without a response' : undefined))
  })
}

function rawCases(key: string): RawCase[] {
  const req = (lines: string[], body = '') => Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}`, 'latin1')
  const h = 'Host: 127.0.0.1'
  const k = `X-Api-Key: ${key}`
  const json = 'Content-Type: application/json'
  const close = 'Connection: close'
  const cases: RawCase[] = [
    {
      name: 'invalid UTF-8 percent-encoding in a path parameter',
      payload: req([`GET ${API}/api-keys/%E0%A4%A HTTP/1.1`, h, k, close]),
    },
    {
      name: 'invalid percent-encoding without a key',
      payload: req([`GET ${API}/api-keys/%E0%A4%A HTTP/1.1`, h, close]),
    },
    {
      name: 'percent sign without hex digits',
      payload: req([`GET ${API}/api-keys/%zz HTTP/1.1`, h, k, close]),
    },
    {
      name: 'overlong UTF-8 encoding of /',
      payload: req([`GET ${API}/api-keys/%C0%AF HTTP/1.1`, h, k, close]),
    },
    {
      name: 'non-numeric Content-Length',
      payload: req([`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Content-Length: abc', close], '{}'),
    },
    {
      name: 'negative Content-Length',
      payload: req([`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Content-Length: -1', close], '{}'),
    },
    {
      name: 'Content-Length with a plus sign',
      payload: req([`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Content-Length: +2', close], '{}'),
    },
    {
      name: 'Content-Length larger than the body (connection half-closed)',
      payload: req([`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Content-Length: 100', close], '{}'),
      endAfterWrite: true,
    },
    {
      name: 'Content-Length smaller than the body',
      payload: req([`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Content-Length: 1', close], '{"name":"x"}'),
    },
    {
      name: 'conflicting duplicate Content-Length',
      payload: req(
        [`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Content-Length: 2', 'Content-Length: 3', close],
        '{}',
      ),
    },
    {
      name: 'Content-Length and Transfer-Encoding together',
      payload: req(
        [
          `POST ${API}/api-keys HTTP/1.1`,
          h,
          k,
          json,
          'Content-Length: 2',
          'Transfer-Encoding: chunked',
          close,
        ],
        '0\r\n\r\n',
      ),
    },
    {
      name: 'huge Content-Length',
      payload: req(
        [`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Content-Length: 99999999999999', close],
        '{}',
      ),
    },
    {
      name: 'Content-Length beyond 2^64',
      payload: req(
        [`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Content-Length: 184467440737095516160', close],
        '{}',
      ),
    },
    {
      name: 'invalid chunk size',
      payload: req(
        [`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Transfer-Encoding: chunked', close],
        'zz\r\n{}\r\n0\r\n\r\n',
      ),
    },
    {
      name: 'overflowing chunk size',
      payload: req(
        [`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Transfer-Encoding: chunked', close],
        'ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n',
      ),
    },
    {
      name: 'chunked body with invalid JSON',
      payload: req(
        [`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Transfer-Encoding: chunked', close],
        '5\r\n{"a":\r\n0\r\n\r\n',
      ),
    },
    {
      name: 'unknown Transfer-Encoding',
      payload: req([`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Transfer-Encoding: fuzz', close], '{}'),
    },
    {
      name: 'control characters in X-Api-Key',
      payload: req([`GET ${API}/tenant HTTP/1.1`, h, 'X-Api-Key: \x01\x02\x7f\x1b[0m', close]),
    },
    {
      name: 'NUL in a header value',
      payload: req([`GET ${API}/tenant HTTP/1.1`, h, 'X-Api-Key: kms_\x00', close]),
    },
    {
      name: 'bare LF inside a header value',
      payload: req([`GET ${API}/tenant HTTP/1.1`, h, 'X-Api-Key: a\nb', close]),
    },
    {
      name: 'obsolete header line folding',
      payload: req([`GET ${API}/tenant HTTP/1.1`, h, 'X-Api-Key: a', ' b', close]),
    },
    {
      name: 'space inside a header name',
      payload: req([`GET ${API}/tenant HTTP/1.1`, h, 'X Api-Key: a', close]),
    },
    { name: 'header without a colon', payload: req([`GET ${API}/tenant HTTP/1.1`, h, 'X-Api-Key', close]) },
    {
      name: 'oversized header block',
      payload: req([`GET ${API}/tenant HTTP/1.1`, h, k, `X-Fuzz: ${'a'.repeat(70_000)}`, close]),
    },
    {
      name: 'oversized request line',
      payload: req([`GET ${API}/audit?action=${'a'.repeat(70_000)} HTTP/1.1`, h, k, close]),
    },
    { name: 'space inside the URL', payload: req([`GET ${API}/ten ant HTTP/1.1`, h, k, close]) },
    { name: 'NUL inside the URL', payload: req([`GET ${API}/\x00 HTTP/1.1`, h, k, close]) },
    {
      name: 'raw 0xFF bytes in the URL',
      payload: req([`GET ${API}/api-keys/\xff\xfe HTTP/1.1`, h, k, close]),
    },
    { name: 'unknown method token', payload: req([`FUZZ ${API}/tenant HTTP/1.1`, h, k, close]) },
    { name: 'lower-case method', payload: req([`get ${API}/tenant HTTP/1.1`, h, k, close]) },
    { name: 'garbage request line', payload: req(['\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03']) },
    { name: 'HTTP/1.1 without a Host header', payload: req([`GET ${API}/tenant HTTP/1.1`, k, close]) },
    {
      name: 'unsupported Expect header',
      payload: req(
        [`POST ${API}/api-keys HTTP/1.1`, h, k, json, 'Expect: fuzz-continue', 'Content-Length: 2', close],
        '{}',
      ),
    },
  ]
  return cases
}

// ---------------------------------------------------------------------------------------------

describe(`fuzz (seed ${SEED})`, { timeout: FUZZ_TIMEOUT_MS }, () => {
  let svc: TestService
  let ops: Operation[] = []
  let cases: FuzzCase[] = []
  let keys: Keys
  const violations: Violation[] = []
  const healthDuring: { index: number; status: number | undefined; error?: string }[] = []
  let elapsedMs = 0

  before(
    async () => {
      svc = await startTestService({
        KMS_CONSOLE_REDIRECT_URIS: FUZZ_REDIRECT,
        KMS_PARTNER_PORTAL_REDIRECT_URIS: FUZZ_PORTAL_REDIRECT,
        // The fuzz reaches the sign-up routes' validation many times from one address.
        KMS_SIGNUP_RATE_PER_HOUR: '1000000',
        // The cloud connection below names this (closed) custom endpoint.
        KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS: 'http://127.0.0.1:9',
      })
      const admin = await svc.createTenant()
      const owner = await memberSession(
        svc,
        await consoleClient(svc.baseUrl, FUZZ_REDIRECT),
        admin.tenantId,
        'tenant:owner',
      )
      const narrow = await svc.createTenant(['audit:read'])
      const doomed = await svc.createTenant()
      const revoke = await svc.request('POST', `${API}/api-keys/${doomed.apiKeyId}/revoke`, {
        key: doomed.key,
      })
      assert.equal(revoke.status, 200, `could not revoke a key for the fuzz: ${revoke.text}`)
      const partner = await svc.api.services.partners.createPartner(
        { name: 'Fuzz partner', email: 'fuzz@example.com' },
        'test',
      )
      const partnerKeys: string[] = []
      for (let i = 0; i < 100; i++)
        partnerKeys.push((await svc.api.services.partners.createKey(partner.id, `fuzz ${i}`, 'test')).key)
      // People of approved partners, signed in to the partner portal through the provider.
      const partnerSessions: string[] = []
      const portal = await applicationClient(svc.baseUrl, 'kms-partner-portal', FUZZ_PORTAL_REDIRECT)
      for (let i = 0; i < 5; i++) {
        const email = `fuzz-portal-${i}@example.com`
        const password = `fuzz-portal-password-${i}`
        const account = await svc.api.services.accounts.createAccount('partners', { email, password })
        const pending = await svc.sql.begin((tx) =>
          svc.api.services.partners.createPending(
            { name: `Fuzz portal ${i}`, email, accountId: account.id, clientIp: null },
            tx,
          ),
        )
        await svc.api.services.partners.decide(pending.id, 'approve', 'test')
        const { tokens } = await signIn(svc.baseUrl, portal, {
          email,
          password,
          resource: 'urn:kms:partner-portal',
          tokenResource: true,
          scope: 'openid api',
        })
        partnerSessions.push(tokens.access_token)
      }
      keys = {
        member: owner.accessToken,
        full: admin.key,
        narrow: narrow.key,
        revoked: doomed.key,
        partners: partnerKeys,
        partnerSessions,
      }

      const docResponse = await svc.request('GET', `${API}/openapi.json`)
      assert.equal(docResponse.status, 200, 'the OpenAPI document is served without a key')
      ops = discoverOperations(docResponse.body as OpenApiDocument)
      assert.ok(ops.length > 0, 'the OpenAPI document lists operations')
      // The document itself is public but hidden from it; the rest say `security: []`.
      const publicRoutes = [
        routePattern(`${API}/openapi.json`),
        ...ops.filter((op) => op.isPublic).map((op) => routePattern(op.template)),
      ]

      const rng = new Rng(SEED)
      // Real keys of every type, so that key routes are fuzzed past the lookup, not only to 404.
      const keyIds: string[] = []
      for (const body of [
        { name: 'fuzz-kem', keyType: 'Encryption' },
        // Exportable: the cloud export below needs it.
        { name: 'fuzz-sign', keyType: 'Signing', algorithm: 'Ed25519', exportable: true },
        { name: 'fuzz-mac', keyType: 'HMAC', algorithm: 'HMAC-SHA256' },
      ]) {
        const created = await svc.request('POST', `${API}/keys`, { key: admin.key, body })
        assert.equal(created.status, 201, `could not create a key for the fuzz: ${created.text}`)
        keyIds.push(created.body.id)
      }
      // A secret with every kind of content and a folder, so secret routes get past the lookup too.
      const folder = await svc.request('POST', `${API}/folders`, { key: admin.key, body: { name: 'fuzz' } })
      assert.equal(folder.status, 201, `could not create a folder for the fuzz: ${folder.text}`)
      const secret = await svc.request('POST', `${API}/secrets`, {
        key: admin.key,
        body: {
          name: 'fuzz-secret',
          value: 'v',
          notes: 'n',
          folderId: folder.body.id,
          customFields: [{ name: 'pin', type: 'number', value: 1, sensitive: true }],
          totp: { secret: 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ' },
        },
      })
      assert.equal(secret.status, 201, `could not create a secret for the fuzz: ${secret.text}`)
      // A cloud connection and an export, so the cloud-export routes get past their lookups too
      // (the endpoint is a closed loopback port the outbound policy refuses: pushes and tests fail
      // as a cloud outage would, which is an answer, never a 5xx).
      const connection = await svc.request('POST', `${API}/cloud-connections`, {
        key: admin.key,
        body: {
          name: 'fuzz-cloud',
          provider: 'scaleway',
          settings: { region: 'fr-par', projectId: randomUUID(), apiUrl: 'http://127.0.0.1:9' },
          credentials: { accessKey: 'SCWABCDEFGHIJ0123456', secretKey: randomUUID() },
        },
      })
      assert.equal(
        connection.status,
        201,
        `could not create a cloud connection for the fuzz: ${connection.text}`,
      )
      const cloudExport = await svc.request('POST', `${API}/keys/${keyIds[1]}/cloud-exports`, {
        key: admin.key,
        body: { connectionId: connection.body.id, target: { keyName: 'fuzz' } },
      })
      assert.equal(
        cloudExport.status,
        201,
        `could not create a cloud export for the fuzz: ${cloudExport.text}`,
      )
      cases = new CaseFactory(rng, ops, keys, publicRoutes, svc.config.bodyLimitBytes, {
        keyId: keyIds,
        id: [secret.body.id, folder.body.id, connection.body.id],
        exportId: [cloudExport.body.id],
      }).build(TARGET_CASES, MIN_RANDOM_ROUNDS)

      const started = performance.now()
      // Health probes are interleaved with the fuzz: the service must keep answering while it runs.
      const work: (FuzzCase | { probe: number })[] = []
      cases.forEach((c, i) => {
        if (i % HEALTH_PROBE_EVERY === 0) work.push({ probe: i })
        work.push(c)
      })
      await runPool(work, CONCURRENCY, async (item) => {
        if ('probe' in item) {
          const o = await send(svc.baseUrl, {
            id: -1,
            category: 'health-probe',
            method: 'GET',
            target: HEALTH_PATH,
            headers: {},
            keyKind: 'none',
          })
          healthDuring.push({
            index: item.probe,
            status: o.status,
            ...(o.transportError ? { error: o.transportError } : {}),
          })
          return
        }
        violations.push(...check(item, await send(svc.baseUrl, item)))
      })
      elapsedMs = performance.now() - started
    },
    { timeout: FUZZ_TIMEOUT_MS },
  )

  after(async () => svc?.stop())

  test('covers every documented operation with at least 2,000 malformed requests', () => {
    const categories = new Set(cases.map((c) => c.category))
    const message = `seed=${SEED}: ${cases.length} requests in ${Math.round(elapsedMs)} ms over ${ops.length} operations; categories: ${[...categories].join(', ')}`
    console.log(`# fuzz: ${message}`)
    assert.ok(cases.length >= 2_000, message)
    for (const op of ops) {
      const route = routePattern(op.template)
      const hits = cases.filter(
        (c) => c.method === op.method && route.test(new URL(c.target, 'http://x').pathname),
      )
      assert.ok(hits.length >= 50, `${op.method} ${op.template} got ${hits.length} requests (${message})`)
    }
    for (const needed of [
      'json-syntax',
      'json-truncated',
      'json-trailing-garbage',
      'json-deep-nesting',
      'json-prototype-poisoning',
      'content-type-wrong',
      'content-type-missing',
      'oversized-body',
      'unknown-field',
      'field-value',
      'path',
      'query-value',
      'query-extra',
      'unusual-method',
      'auth',
      'headers',
      'unknown-route',
    ]) {
      assert.ok(categories.has(needed), `category ${needed} was generated (${message})`)
    }
  })

  test('every request got a response', () => {
    const failed = violations.filter((x) => x.kind === 'no-response')
    assert.equal(failed.length, 0, report(failed, 'requests without a response', ops))
  })

  test('no response is a 5xx', () => {
    const failed = violations.filter((x) => x.kind === '5xx')
    assert.equal(failed.length, 0, report(failed, '5xx responses', ops))
  })

  test('every non-2xx answer under /api/v1 is a 4xx {error, message} JSON body with x-request-id', () => {
    const failed = violations.filter((x) => x.kind === 'error-format')
    assert.equal(failed.length, 0, report(failed, 'malformed error responses', ops))
  })

  test('cases with a certain outcome get exactly that status and error code', () => {
    const failed = violations.filter((x) => x.kind === 'expectation')
    assert.equal(failed.length, 0, report(failed, 'unexpected statuses', ops))
  })

  test('health answered 200 throughout the fuzz', () => {
    assert.ok(
      healthDuring.length >= Math.floor(cases.length / HEALTH_PROBE_EVERY),
      `seed=${SEED}: probes ran`,
    )
    const bad = healthDuring.filter((h) => h.status !== 200)
    assert.deepEqual(bad, [], `seed=${SEED}: health during the fuzz`)
  })

  test('prototype-poisoning payloads did not pollute Object.prototype', () => {
    assert.equal(Object.hasOwn(Object.prototype, POLLUTION_MARKER), false, `seed=${SEED}`)
    assert.equal(({} as Record<string, unknown>)[POLLUTION_MARKER], undefined, `seed=${SEED}`)
  })

  test('raw byte-level requests get a 4xx, never a 5xx, never a hang', async () => {
    const raw = rawCases(keys.full)
    const results = await Promise.all(
      raw.map(async (c) => ({ c, r: await rawRequest(svc.baseUrl, c.payload, c.endAfterWrite === true) })),
    )
    const failures = results
      .filter(({ r }) => r.status === undefined || r.status < 400 || r.status >= 500)
      .map(
        ({ c, r }) =>
          `  ${c.name}: ${r.error ?? `status ${r.status}`}\n      sent ${JSON.stringify(c.payload.toString('latin1').slice(0, 160))}\n      got ${JSON.stringify(r.head.slice(0, 160))}`,
      )
    assert.deepEqual(failures, [], `seed=${SEED}: raw requests\n${failures.join('\n')}`)
  })

  test('the service still answers afterwards: health 200 and the fuzz key still works', async () => {
    const health = await svc.request('GET', HEALTH_PATH)
    assert.equal(health.status, 200, `seed=${SEED}: ${health.text}`)
    assert.equal(health.body.status, 'ok', `seed=${SEED}: ${health.text}`)
    const tenant = await svc.request('GET', `${API}/tenant`, { key: keys.full })
    assert.equal(tenant.status, 200, `seed=${SEED}: ${tenant.text}`)
  })
})
