import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { pathToFileURL } from 'node:url'
import {
  NODE_BIN,
  PROJECT_ROOT,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * A client generated from the live OpenAPI document: openapi-typescript (programmatic API) turns
 * the document into types, the project's TypeScript 7 type-checks a small openapi-fetch program
 * written against them, and the program then calls the service (create a key, encrypt, decrypt).
 *
 * openapi-typescript needs the TypeScript 5 compiler API; it lives with its own TypeScript 5 in
 * the npm workspace tools/openapi-client (docs/decisions.md), while `npm run typecheck` uses 7.
 */

const TOOLS = join(PROJECT_ROOT, 'tools', 'openapi-client')
const toolsRequire = createRequire(join(TOOLS, 'package.json'))
const TSC = join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc')

interface OpenApiTs {
  default: (schema: object, options: { defaultNonNullable: boolean }) => Promise<unknown[]>
  astToString: (ast: unknown[]) => string
}

async function generateTypes(document: object): Promise<string> {
  const root = dirname(toolsRequire.resolve('openapi-typescript/package.json'))
  const openapiTS = (await import(pathToFileURL(join(root, 'dist', 'index.mjs')).href)) as OpenApiTs
  // A request field with a default (mode, keyBytes, ...) is optional for the caller; openapi-typescript
  // 7 makes it required unless told otherwise (docs/decisions.md, OpenAPI document).
  return openapiTS.astToString(await openapiTS.default(document, { defaultNonNullable: false }))
}

function run(file: string, args: string[], cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(NODE_BIN, [file, ...args], { cwd, timeout: 120_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0
      resolve({ code, output: `${stdout}${stderr}` })
    })
  })
}

/** The program a client developer would write: every request and answer is typed by the document. */
const CLIENT = `import createClient from 'openapi-fetch'
import type { components, paths } from './api.ts'

type KeyView = components['schemas']['KeyView']
type EncryptResponse = components['schemas']['EncryptResponse']

const [baseUrl, apiKey] = process.argv.slice(2) as [string, string]
// JSON answers: /encrypt and /decrypt also answer raw bytes to a raw request.
const client = createClient<paths, 'application/json'>({ baseUrl, headers: { 'X-Api-Key': apiKey } })

const created = await client.POST('/api/v1/keys', {
  body: { name: 'typed-client', keyType: 'Encryption', algorithm: 'ML-KEM-768' },
})
if (!created.data) throw new Error(\`create: \${created.response.status} \${JSON.stringify(created.error)}\`)
const key: KeyView = created.data
const id: string = key.id
const pq: boolean = key.isPostQuantum

const encrypted = await client.POST('/api/v1/encrypt', {
  body: { keyId: id, plaintext: Buffer.from('typed hello').toString('base64'), context: 'typed' },
})
if (!encrypted.data) throw new Error(\`encrypt: \${encrypted.response.status}\`)
const envelope: EncryptResponse = encrypted.data

// The encrypt answer goes back to decrypt as it is, with the same context.
const decrypted = await client.POST('/api/v1/decrypt', { body: { ...envelope, context: 'typed' } })
if (!decrypted.data) throw new Error(\`decrypt: \${decrypted.response.status}\`)
const version: number = decrypted.data.keyVersion

const fetched = await client.GET('/api/v1/keys/{keyId}', { params: { path: { keyId: id } } })
const missing = await client.GET('/api/v1/keys/{keyId}', {
  params: { path: { keyId: '00000000-0000-4000-8000-000000000000' } },
})
const notFound: string | undefined = missing.error?.error

console.log(
  JSON.stringify({
    id,
    pq,
    algorithm: key.algorithm,
    version,
    plaintext: Buffer.from(decrypted.data.plaintext, 'base64').toString('utf8'),
    fetchedName: fetched.data?.name,
    notFound,
    notFoundStatus: missing.response.status,
  }),
)
`

/** Misuses the types: each marked line must be a type error, or the types say nothing. */
const MISUSE = `import createClient from 'openapi-fetch'
import type { components, paths } from './api.ts'

const client = createClient<paths, 'application/json'>({ baseUrl: 'http://127.0.0.1:1' })
// A key type the document does not list.
await client.POST('/api/v1/keys', { body: { name: 'x', keyType: 'Symmetric' } })
// A required field missing.
await client.POST('/api/v1/encrypt', { body: { context: 'no plaintext' } })
// A field of the view read with the wrong type.
const view = {} as components['schemas']['KeyView']
const version: string = view.version
// A path the API does not have.
await client.GET('/api/v1/nowhere')
export { version }
`

const MISUSE_LINES = [6, 8, 11, 13]

const COMPONENT = '#/components/schemas/'

/** The document as it was before named components: every `$ref` replaced by its schema. */
function inlined(document: Record<string, unknown>): Record<string, unknown> {
  const components = document['components'] as { schemas: Record<string, unknown> }
  const walk = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(walk)
    if (value === null || typeof value !== 'object') return value
    const ref = (value as { $ref?: unknown }).$ref
    if (typeof ref === 'string' && ref.startsWith(COMPONENT))
      return walk(components.schemas[ref.slice(COMPONENT.length)])
    return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, walk(field)]))
  }
  const { schemas: _, ...others } = components
  return { ...(walk({ ...document, components: {} }) as Record<string, unknown>), components: others }
}

let svc: TestService
let tenant: TenantWithKey
let dir: string

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
  // Inside the project, so the program resolves openapi-fetch and @types/node from node_modules.
  await mkdir(join(PROJECT_ROOT, 'data', 'test'), { recursive: true })
  dir = await mkdtemp(join(PROJECT_ROOT, 'data', 'test', 'openapi-client-'))
})
after(async () => {
  await svc?.stop()
  if (dir) await rm(dir, { recursive: true, force: true })
})

test('the generator runs on TypeScript 5 and the project type-checks with TypeScript 7', async () => {
  const tools = toolsRequire('typescript/package.json') as { version: string }
  const project = JSON.parse(
    await readFile(join(PROJECT_ROOT, 'node_modules', 'typescript', 'package.json'), 'utf8'),
  )
  assert.match(tools.version, /^5\./)
  assert.match(project.version, /^7\./)
})

test('a client generated from the live document type-checks and calls the service', async () => {
  const res = await svc.request('GET', '/api/v1/openapi.json')
  assert.equal(res.status, 200)
  const types = await generateTypes(res.body)
  // Named components are real types, not `never` as with an inlined document.
  assert.doesNotMatch(types, /schemas: never/)
  assert.match(types, /KeyView: \{/)

  await writeFile(join(dir, 'api.ts'), types)
  await writeFile(join(dir, 'client.ts'), CLIENT)
  await writeFile(join(dir, 'misuse.ts'), MISUSE)
  // The same program against the types of an inlined document: it must not type-check.
  await writeFile(join(dir, 'api-inlined.ts'), await generateTypes(inlined(res.body)))
  await writeFile(join(dir, 'inlined.ts'), CLIENT.replace("from './api.ts'", "from './api-inlined.ts'"))
  await writeFile(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ extends: join(PROJECT_ROOT, 'tsconfig.json'), include: ['*.ts'] }),
  )

  const checked = await run(TSC, ['--noEmit', '-p', dir], dir)
  const errors = checked.output.split('\n').filter((line) => /error TS\d+/.test(line))
  // The program the client developer writes has no error at all ...
  assert.deepEqual(
    errors.filter((line) => !line.startsWith('misuse.ts') && !line.startsWith('inlined.ts')),
    [],
    checked.output,
  )
  // ... the check would have failed with an inlined document, whose schemas are `never` ...
  const inlinedErrors = errors.filter((line) => line.startsWith('inlined.ts'))
  assert.ok(
    inlinedErrors.some((line) => line.includes("'never'")),
    checked.output,
  )
  // ... and each misuse is caught: the types constrain bodies, answers and paths.
  const misuse = errors.filter((line) => line.startsWith('misuse.ts'))
  const misuseLines = [...new Set(misuse.map((line) => Number(/^misuse\.ts\((\d+),/.exec(line)?.[1])))]
  assert.deepEqual(
    misuseLines.sort((a, b) => a - b),
    MISUSE_LINES,
    checked.output,
  )

  const called = await run(join(dir, 'client.ts'), [svc.baseUrl, tenant.key], dir)
  assert.equal(called.code, 0, called.output)
  const answer = JSON.parse(called.output.trim().split('\n').at(-1)!)
  assert.match(answer.id, /^[0-9a-f-]{36}$/)
  assert.equal(answer.pq, true)
  assert.equal(answer.algorithm, 'ML-KEM-768')
  assert.equal(answer.version, 1)
  assert.equal(answer.plaintext, 'typed hello')
  assert.equal(answer.fetchedName, 'typed-client')
  assert.equal(answer.notFoundStatus, 404)
  assert.equal(answer.notFound, 'key_not_found')
})
