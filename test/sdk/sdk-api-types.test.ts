import assert from 'node:assert/strict'
import { readFile, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { pathToFileURL } from 'node:url'
import { PROJECT_ROOT, startTestService, type TestService } from '../helpers/service.ts'

/**
 * The API's client types, for the SDK, the CLI and the console alike, come from the service's own
 * OpenAPI document: packages/sdk/src/schema.ts is what openapi-typescript makes of the live
 * document (console/src/api/schema.ts re-exports it). This test fails when a route or schema
 * changed and the committed types did not follow; run it with KMS_UPDATE_SDK_API=1 to write the
 * file anew, then `npm run typecheck`, which fails wherever the SDK's, the CLI's or the console's
 * calls no longer match the API.
 */

const SCHEMA_FILE = join(PROJECT_ROOT, 'packages', 'sdk', 'src', 'schema.ts')
const toolsRequire = createRequire(join(PROJECT_ROOT, 'tools', 'openapi-client', 'package.json'))
const HEADER =
  "// Generated from the service's OpenAPI document by test/sdk/sdk-api-types.test.ts\n// (KMS_UPDATE_SDK_API=1 writes it anew). Do not edit.\n\n"

interface OpenApiTs {
  default: (schema: object, options: { defaultNonNullable: boolean }) => Promise<unknown[]>
  astToString: (ast: unknown[]) => string
}

let svc: TestService
before(async () => {
  svc = await startTestService()
})
after(async () => {
  await svc?.stop()
})

test("the SDK's API types are generated from the live OpenAPI document", async () => {
  const res = await fetch(`${svc.baseUrl}/api/v1/openapi.json`)
  assert.equal(res.status, 200)
  const document = (await res.json()) as object
  const root = dirname(toolsRequire.resolve('openapi-typescript/package.json'))
  const openapiTS = (await import(pathToFileURL(join(root, 'dist', 'index.mjs')).href)) as OpenApiTs
  const generated =
    HEADER + openapiTS.astToString(await openapiTS.default(document, { defaultNonNullable: false }))
  if (process.env['KMS_UPDATE_SDK_API'] === '1') await writeFile(SCHEMA_FILE, generated)
  const committed = await readFile(SCHEMA_FILE, 'utf8').catch(() => '')
  assert.ok(
    committed === generated,
    'packages/sdk/src/schema.ts differs from the live document: run this test with KMS_UPDATE_SDK_API=1',
  )
  // The SDK's envelope keyring and the console rest on these operations; the document must keep them.
  for (const path of [
    '/api/v1/me',
    '/api/v1/keys',
    '/api/v1/secrets',
    '/api/v1/api-keys',
    '/api/v1/audit',
    '/api/v1/keys/{keyId}/data-key',
    '/api/v1/keys/{keyId}/wrap',
    '/api/v1/keys/{keyId}/unwrap',
  ])
    assert.ok(generated.includes(`"${path}"`), path)
})
