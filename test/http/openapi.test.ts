import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { createConfig, lintFromString } from '@redocly/openapi-core'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import { ENCRYPT_JSON_BODY_LIMIT_BYTES } from '../../src/crypto/crypto-schemas.ts'
import { documentTransform, routeTransform } from '../../src/http/openapi.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * The served OpenAPI document: named components referenced with $ref, servers, an example for
 * every request body that validates against its schema (checked here with an Ajv of our own, not
 * Fastify's compile) and that the service accepts, and no error from the Redocly linter.
 */

const API = '/api/v1'
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch']

// biome-ignore lint/suspicious/noExplicitAny: the document is JSON of any shape; each test reads what it asserts
type Json = any

// ajv-formats is CommonJS; its default export arrives wrapped under native ESM.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv2020,
) => Ajv2020

let svc: TestService
let tenant: TenantWithKey
let doc: Json

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
  const res = await svc.request('GET', `${API}/openapi.json`)
  assert.equal(res.status, 200)
  doc = res.body
})
after(async () => svc?.stop())

interface Operation {
  method: string
  path: string
  op: Json
}

function operations(): Operation[] {
  const out: Operation[] = []
  for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const method of Object.keys(item).filter((m) => HTTP_METHODS.includes(m))) {
      out.push({ method, path, op: item[method] })
    }
  }
  return out
}

describe('named schemas', () => {
  test('the document lists servers and named components for requests, views and errors', () => {
    assert.deepEqual(
      doc.servers.map((s: Json) => s.url),
      ['/'],
    )
    const names = Object.keys(doc.components.schemas)
    for (const name of [
      'KeyView',
      'KeyList',
      'ApiKeyView',
      'ErrorResponse',
      'ValidationError',
      'EncryptRequest',
      'EncryptResponse',
      'DecryptRequest',
      'DecryptResponse',
      'CreateKeyRequest',
      'ImportKeyRequest',
      'SecretView',
      'FolderView',
      'AuditRecord',
    ]) {
      assert.ok(names.includes(name), `components.schemas.${name} (have: ${names.join(', ')})`)
    }
    // No generator-made names (def-0, ...): every component is named in the source.
    assert.deepEqual(
      names.filter((n) => /^def-\d+$/.test(n)),
      [],
    )
  })

  test('every JSON request body and every 4xx response is a $ref to a component', () => {
    const inline: string[] = []
    for (const { method, path, op } of operations()) {
      const body = op.requestBody?.content?.['application/json']?.schema
      if (body !== undefined && typeof body.$ref !== 'string') inline.push(`${method} ${path} body`)
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        const schema = response.content?.['application/json']?.schema
        if (status.startsWith('4') && typeof schema?.$ref !== 'string')
          inline.push(`${method} ${path} ${status}`)
      }
    }
    assert.deepEqual(inline, [])
  })

  test('a key answer is typed as KeyView, and a 400 as ValidationError with the fields that failed', () => {
    const create = doc.paths[`${API}/keys`].post
    assert.equal(
      create.responses['201'].content['application/json'].schema.$ref,
      '#/components/schemas/KeyView',
    )
    assert.equal(
      create.responses['400'].content['application/json'].schema.$ref,
      '#/components/schemas/ValidationError',
    )
    const view = doc.components.schemas.KeyView
    assert.equal(view.type, 'object')
    assert.equal(view.properties.id.format, 'uuid')
    // TypeBox enums carry no `type`; the document adds it so generators type them as strings.
    assert.equal(view.properties.keyType.type, 'string')
    assert.ok(view.properties.keyType.enum.includes('Encryption'))
    // Serializer hints stay out of the document.
    assert.doesNotMatch(JSON.stringify(doc), /"format":"unsafe"/)
    const fields = doc.components.schemas.ValidationError.properties.fields
    assert.deepEqual(Object.keys(fields.items.properties).sort(), ['message', 'path'])
  })
})

describe('examples', () => {
  test('every JSON request body has an example, and every example validates against its schema', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false })
    addFormats(ajv)
    // The whole document as one schema resource: `#/components/schemas/X` resolves inside it.
    ajv.addSchema(doc, 'openapi.json')
    const missing: string[] = []
    const invalid: string[] = []
    let checked = 0
    const check = (where: string, pointer: string, example: unknown) => {
      const validate = ajv.getSchema(`openapi.json#${pointer}`)
      assert.ok(validate, `${where}: schema at ${pointer}`)
      checked++
      if (!validate(example)) invalid.push(`${where}: ${ajv.errorsText(validate.errors)}`)
    }
    const pointerToken = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1')
    for (const { method, path, op } of operations()) {
      const base = `/paths/${pointerToken(path)}/${method}`
      const media = op.requestBody?.content?.['application/json']
      if (media !== undefined) {
        if (media.example === undefined) missing.push(`${method} ${path}`)
        else
          check(
            `${method} ${path} request`,
            `${base}/requestBody/content/application~1json/schema`,
            media.example,
          )
      }
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        const json = response.content?.['application/json']
        if (json?.example !== undefined) {
          check(
            `${method} ${path} ${status}`,
            `${base}/responses/${status}/content/application~1json/schema`,
            json.example,
          )
        }
      }
    }
    for (const [name, schema] of Object.entries(doc.components.schemas as Record<string, Json>)) {
      for (const [i, example] of (schema.examples ?? []).entries()) {
        check(`components.schemas.${name}.examples[${i}]`, `/components/schemas/${name}`, example)
      }
    }
    assert.deepEqual(missing, [])
    assert.deepEqual(invalid, [])
    assert.ok(checked >= 40, `${checked} examples checked`)
  })

  test('the example bodies are accepted by the service: no validation error from any route', async () => {
    // Real keys for the per-key routes; the import example is the signing key export-private names.
    const encryption = await svc.request('POST', `${API}/keys`, {
      key: tenant.key,
      body: { name: 'example-encryption', keyType: 'Encryption', isDefault: true },
    })
    assert.equal(encryption.status, 201, encryption.text)
    const hmac = await svc.request('POST', `${API}/keys`, {
      key: tenant.key,
      body: { name: 'example-hmac', keyType: 'HMAC', algorithm: 'HMAC-SHA256' },
    })
    assert.equal(hmac.status, 201, hmac.text)
    const exampleOf = (path: string, method: string) =>
      doc.paths[`${API}${path}`][method].requestBody.content['application/json'].example

    const imported = await svc.request('POST', `${API}/keys/import`, {
      key: tenant.key,
      body: exampleOf('/keys/import', 'post'),
    })
    assert.equal(imported.status, 201, imported.text)
    const created = await svc.request('POST', `${API}/keys`, {
      key: tenant.key,
      body: exampleOf('/keys', 'post'),
    })
    assert.equal(created.status, 201, created.text)
    const encrypted = await svc.request('POST', `${API}/encrypt`, {
      key: tenant.key,
      body: exampleOf('/encrypt', 'post'),
    })
    assert.equal(encrypted.status, 200, encrypted.text)
    assert.equal(encrypted.body.keyId, encryption.body.id)

    const keyFor = (path: string): string =>
      /\/(data-key|wrap|unwrap)$/.test(path)
        ? encryption.body.id
        : path.includes('/mac')
          ? hmac.body.id
          : imported.body.id
    const refused: string[] = []
    for (const { method, path, op } of operations()) {
      const example = op.requestBody?.content?.['application/json']?.example
      if (example === undefined || path === `${API}/keys/import` || path === `${API}/keys`) continue
      const url = path
        .replace('{keyId}', keyFor(path))
        .replace('{id}', '00000000-0000-4000-8000-000000000000')
        .replace('{alias}', 'alias%2Fopenapi-example')
        .replace('{version}', '1')
        .replace('{name}', 'openapi-example')
        .replace('{serial}', '01')
      const res = await svc.request(method.toUpperCase(), url, { key: tenant.key, body: example })
      // An unknown id (404), a missing scope or a refused state is fine; a malformed body is not.
      if (res.status >= 500 || res.status === 413 || res.body?.error === 'validation_failed') {
        refused.push(`${method} ${path}: ${res.status} ${res.text.slice(0, 200)}`)
      }
    }
    assert.deepEqual(refused, [])
  })
})

describe('error examples', () => {
  /** The example of one response status of an operation (JSON), if any. */
  const exampleOf = (op: Json, status: string) => op.responses[status]?.content?.['application/json']?.example

  test('each error status of an operation shows its own example', () => {
    const shared: string[] = []
    for (const { method, path, op } of operations()) {
      const seen = new Map<string, string>()
      for (const status of Object.keys(op.responses).filter((s) => /^[45]/.test(s))) {
        const example = exampleOf(op, status)
        if (example === undefined) continue
        const text = JSON.stringify(example)
        const other = seen.get(text)
        if (other !== undefined) shared.push(`${method} ${path}: ${other} and ${status}`)
        seen.set(text, status)
      }
    }
    assert.deepEqual(shared, [], 'statuses sharing one example')
  })

  test('the /encrypt error examples are what the service answers with each status', async () => {
    const op = doc.paths[`${API}/encrypt`].post
    const t = await svc.createTenant()
    const created = await svc.request('POST', `${API}/keys`, {
      key: t.key,
      body: { name: 'revoked', keyType: 'Encryption' },
    })
    assert.equal(created.status, 201, created.text)
    const revoked = await svc.request('POST', `${API}/keys/${created.body.id}/revoke`, { key: t.key })
    assert.equal(revoked.status, 200, revoked.text)
    const reader = await svc.request('POST', `${API}/api-keys`, {
      key: t.key,
      body: { name: 'no encryption', scopes: ['keys:read'] },
    })
    assert.equal(reader.status, 201, reader.text)
    const encrypt = (keyId: string, key?: string) =>
      svc.request('POST', `${API}/encrypt`, {
        ...(key === undefined ? {} : { key }),
        body: { keyId, plaintext: Buffer.from('hello').toString('base64') },
      })
    const answers: Record<string, HttpResult> = {
      '401': await encrypt(created.body.id),
      '403': await encrypt(created.body.id, reader.body.key),
      '404': await encrypt(randomUUID(), t.key),
      '409': await encrypt(created.body.id, t.key),
      '413': await svc.request('POST', `${API}/encrypt`, {
        key: t.key,
        rawBody: JSON.stringify({ plaintext: 'A'.repeat(ENCRYPT_JSON_BODY_LIMIT_BYTES) }),
        headers: { 'content-type': 'application/json' },
      }),
      '415': await svc.request('POST', `${API}/encrypt`, {
        key: t.key,
        rawBody: 'hello',
        headers: { 'content-type': 'text/plain' },
      }),
    }
    for (const [status, answer] of Object.entries(answers)) {
      assert.equal(String(answer.status), status, answer.text)
      const example = exampleOf(op, status)
      assert.ok(example, `POST /encrypt documents ${status}`)
      // The same code and the same fields; values (a scope, a limit) may be another route's.
      assert.equal(example.error, answer.body.error, `${status}: ${JSON.stringify(example)}`)
      assert.deepEqual(Object.keys(example).sort(), Object.keys(answer.body).sort(), status)
    }
  })
})

describe('linter', () => {
  /**
   * Warnings accepted, each with its reason:
   * - info-license: the project has chosen no licence; the document does not invent one.
   * - operation-4xx-response on GET /health: it takes no input and no credential, so it has no 4xx.
   */
  const ACCEPTED_WARNINGS = new Set([
    'info-license #/info',
    'operation-4xx-response #/paths/~1api~1v1~1health/get/responses',
  ])

  test('Redocly (recommended rules) finds no error and no warning beyond the accepted ones', async () => {
    const config = await createConfig({ extends: ['recommended'] })
    const problems = await lintFromString({
      source: JSON.stringify(doc),
      absoluteRef: 'openapi.json',
      config,
    })
    const found = problems.map((p) => ({
      severity: p.severity,
      key: `${p.ruleId} ${p.location[0]?.pointer ?? ''}`,
      message: p.message,
    }))
    assert.deepEqual(
      found.filter((p) => p.severity === 'error'),
      [],
    )
    assert.deepEqual(
      found.filter((p) => p.severity !== 'error' && !ACCEPTED_WARNINGS.has(p.key)),
      [],
    )
  })

  test('the linter is real: a document without servers and with a bad example gets errors', async () => {
    const broken = structuredClone(doc)
    delete broken.servers
    broken.paths[`${API}/encrypt`].post.requestBody.content['application/json'].example = { plaintext: 42 }
    const config = await createConfig({
      extends: ['recommended'],
      rules: { 'no-invalid-media-type-examples': 'error' },
    })
    const problems = await lintFromString({
      source: JSON.stringify(broken),
      absoluteRef: 'openapi.json',
      config,
    })
    const rules = new Set(problems.filter((p) => p.severity === 'error').map((p) => p.ruleId))
    assert.ok(rules.has('no-empty-servers'), [...rules].join(', '))
    assert.ok(rules.has('no-invalid-media-type-examples'), [...rules].join(', '))
  })
})

describe('the document transform', () => {
  const named = (description: string, extra: Record<string, unknown> = {}) => ({
    $id: 'Thing',
    type: 'object',
    properties: { kind: { enum: ['a', 'b'] }, ...extra },
    description,
  })
  const documentOf = (...schemas: object[]) => ({
    openapi: '3.1.0',
    paths: Object.fromEntries(
      schemas.map((schema, i) => [
        `/p${i}`,
        {
          get: {
            responses: {
              '200': {
                description: 'ok',
                content: { 'application/json': { schema: routeTransform({ schema, url: '' }).schema } },
              },
            },
          },
        },
      ]),
    ),
  })

  test('one component per name, each use a $ref keeping its own description, enums typed', () => {
    const out = documentTransform(documentOf(named('first use'), named('second use'))) as Json
    assert.deepEqual(out.paths['/p0'].get.responses['200'].content['application/json'].schema, {
      $ref: '#/components/schemas/Thing',
      description: 'first use',
    })
    assert.equal(
      out.paths['/p1'].get.responses['200'].content['application/json'].schema.description,
      'second use',
    )
    assert.deepEqual(out.components.schemas.Thing, {
      type: 'object',
      properties: { kind: { type: 'string', enum: ['a', 'b'] } },
    })
  })

  test('two different schemas under one name fail the document build', () => {
    assert.throws(
      () => documentTransform(documentOf(named('x'), named('x', { extra: { type: 'string' } }))),
      /Two different schemas are named Thing/,
    )
  })
})
