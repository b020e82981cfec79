import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import type { Scope } from '../../src/auth/scopes.ts'
import { uniqueName } from '../helpers/api-client.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * Folders and the placement of secrets in them (docs/secrets.md), over real HTTP on the real
 * PostgreSQL: the tree (paths, sibling names, moves, cycles, the depth limit, deletion), secret
 * names per folder and moves between folders, tenant isolation and scopes on every secrets and
 * folders route, and concurrent writes that must not break the invariants.
 */

let svc: TestService
/** The default tenant; most tests make their own so that lists and names are theirs alone. */
let tenant: TenantWithKey

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
})
after(async () => svc?.stop())

type Who = TenantWithKey | string

function call(method: string, path: string, body?: unknown, who: Who = tenant): Promise<HttpResult> {
  const key = typeof who === 'string' ? who : who.key
  return svc.request(method, `/api/v1${path}`, { key, ...(body === undefined ? {} : { body }) })
}

function expectError(res: HttpResult, status: number, code: string, what = ''): void {
  assert.equal(res.status, status, `${what}: ${res.text}`)
  assert.equal(res.body?.error, code, `${what}: ${res.text}`)
}

interface Folder {
  id: string
  name: string
  parentId: string | null
  path: string
  createdAt: string
  updatedAt: string
  createdBy: string
  updatedBy: string
}

async function createFolder(
  name: string,
  parentId: string | null = null,
  who: Who = tenant,
): Promise<Folder> {
  const res = await call('POST', '/folders', { name, ...(parentId ? { parentId } : {}) }, who)
  assert.equal(res.status, 201, res.text)
  return res.body as Folder
}

/** `depth` folders, each inside the previous one; the first at the top level (or under `parentId`). */
async function createChain(depth: number, prefix: string, who: Who = tenant, parentId: string | null = null) {
  const chain: Folder[] = []
  for (let level = 1; level <= depth; level++) {
    chain.push(await createFolder(`${prefix}${level}`, chain.at(-1)?.id ?? parentId, who))
  }
  return chain
}

async function createSecret(
  name: string,
  folderId: string | null = null,
  who: Who = tenant,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const res = await call('POST', '/secrets', { name, value: `value of ${name}`, folderId, ...extra }, who)
  assert.equal(res.status, 201, res.text)
  return res.body.id as string
}

async function getFolder(id: string, who: Who = tenant): Promise<Folder> {
  const res = await call('GET', `/folders/${id}`, undefined, who)
  assert.equal(res.status, 200, res.text)
  return res.body as Folder
}

async function folderRow(id: string) {
  const [row] = await svc.sql<{ tenant_id: string; parent_id: string | null; name: string }[]>`
    SELECT tenant_id, parent_id, name FROM secret_folders WHERE id = ${id}`
  return row ? { ...row } : undefined
}

async function secretRow(id: string) {
  const [row] = await svc.sql<
    { tenant_id: string; folder_id: string | null; name: string; deleted_at: Date | null }[]
  >`SELECT tenant_id, folder_id, name, deleted_at FROM secrets WHERE id = ${id}`
  return row ? { ...row } : undefined
}

async function auditRecords(tenantId: string, action: string, resource?: string) {
  return svc.sql<
    { actor: string; resource: string; outcome: string; details: Record<string, unknown> | null }[]
  >`
    SELECT actor, resource, outcome, details FROM audit_log
    WHERE tenant_id = ${tenantId} AND action = ${action}
      ${resource === undefined ? svc.sql`` : svc.sql`AND resource = ${resource}`}
    ORDER BY id`
}

/** Every stored folder, secret and version of a tenant, to show that a refused call changed nothing. */
async function snapshot(tenantId: string) {
  const folders = await svc.sql`SELECT * FROM secret_folders WHERE tenant_id = ${tenantId} ORDER BY id`
  const secrets = await svc.sql`SELECT * FROM secrets WHERE tenant_id = ${tenantId} ORDER BY id`
  const versions = await svc.sql`
    SELECT v.* FROM secret_versions v JOIN secrets s ON s.id = v.secret_id
    WHERE s.tenant_id = ${tenantId} ORDER BY v.secret_id, v.version`
  return { folders: [...folders], secrets: [...secrets], versions: [...versions] }
}

/** Content audit records (secrets.* and folders.*, not authorization.denied) of a tenant. */
async function contentAuditCount(tenantId: string): Promise<number> {
  const [row] = await svc.sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM audit_log
    WHERE tenant_id = ${tenantId} AND (action LIKE 'secrets.%' OR action LIKE 'folders.%')`
  return row!.n
}

const paths = (res: HttpResult) => (res.body.data as Folder[]).map((f) => f.path)
const ids = (res: HttpResult) => (res.body.data as { id: string }[]).map((s) => s.id)

describe('folders', () => {
  test('create at the top level and nested: parentId and path name the chain from the top', async () => {
    const t = await svc.createTenant()
    const a = await createFolder('a', null, t)
    assert.equal(a.name, 'a')
    assert.equal(a.parentId, null)
    assert.equal(a.path, 'a')
    assert.equal(a.createdBy, `apikey:${t.apiKeyId}`)
    assert.equal(a.updatedBy, a.createdBy)
    const b = await createFolder('b', a.id, t)
    const c = await createFolder('c', b.id, t)
    assert.equal(b.parentId, a.id)
    assert.equal(b.path, 'a/b')
    assert.equal(c.parentId, b.id)
    assert.equal(c.path, 'a/b/c')

    assert.deepEqual(await getFolder(c.id, t), c, 'GET answers what the creation answered')
    assert.deepEqual(await folderRow(c.id), { tenant_id: t.tenantId, parent_id: b.id, name: 'c' })
    // An explicit null parent is the top level too.
    const top = await call('POST', '/folders', { name: 'top', parentId: null }, t)
    assert.equal(top.status, 201, top.text)
    assert.equal(top.body.parentId, null)
    assert.equal(top.body.path, 'top')
  })

  test('sibling names are unique; the same name under different parents is fine; top-level duplicates are refused', async () => {
    const t = await svc.createTenant()
    const p = await createFolder('p', null, t)
    const q = await createFolder('q', null, t)
    await createFolder('x', p.id, t)
    expectError(
      await call('POST', '/folders', { name: 'x', parentId: p.id }, t),
      409,
      'folder_name_taken',
      'p/x',
    )
    const qx = await createFolder('x', q.id, t)
    assert.equal(qx.path, 'q/x')
    const topX = await createFolder('x', null, t)
    assert.equal(topX.path, 'x')
    expectError(await call('POST', '/folders', { name: 'x' }, t), 409, 'folder_name_taken', 'top-level x')
    expectError(
      await call('POST', '/folders', { name: 'p', parentId: null }, t),
      409,
      'folder_name_taken',
      'p',
    )

    // A rename onto a sibling's name, and a move next to a folder of the same name, are refused too.
    const y = await createFolder('y', p.id, t)
    expectError(await call('PATCH', `/folders/${y.id}`, { name: 'x' }, t), 409, 'folder_name_taken', 'rename')
    expectError(
      await call('PATCH', `/folders/${qx.id}`, { parentId: p.id }, t),
      409,
      'folder_name_taken',
      'move',
    )
    expectError(
      await call('PATCH', `/folders/${qx.id}`, { parentId: null }, t),
      409,
      'folder_name_taken',
      'to top',
    )
    assert.equal((await getFolder(y.id, t)).path, 'p/y')
    assert.equal((await getFolder(qx.id, t)).path, 'q/x')

    const rows =
      await svc.sql`SELECT parent_id FROM secret_folders WHERE tenant_id = ${t.tenantId} AND name = 'x'`
    assert.equal(rows.length, 3, 'p/x, q/x and x')
  })

  test('a name containing "/" (or an empty name) is refused with 400 on create and rename', async () => {
    const t = await svc.createTenant()
    const kept = await createFolder('kept', null, t)
    for (const name of ['a/b', '/', '/a', 'a/', '']) {
      const created = await call('POST', '/folders', { name }, t)
      expectError(created, 400, 'validation_failed', `create ${JSON.stringify(name)}`)
      const nested = await call('POST', '/folders', { name, parentId: kept.id }, t)
      expectError(nested, 400, 'validation_failed', `nested ${JSON.stringify(name)}`)
      const renamed = await call('PATCH', `/folders/${kept.id}`, { name }, t)
      expectError(renamed, 400, 'validation_failed', `rename ${JSON.stringify(name)}`)
    }
    const rows = await svc.sql`SELECT name FROM secret_folders WHERE tenant_id = ${t.tenantId}`
    assert.deepEqual(
      rows.map((r) => r['name']),
      ['kept'],
      'nothing was created or renamed',
    )
  })

  test('list: every folder by path, one level with parentId=<id> or root, pages with limit/offset and total', async () => {
    const t = await svc.createTenant()
    const gamma = await createFolder('gamma', null, t)
    const alpha = await createFolder('alpha', null, t)
    const beta = await createFolder('beta', null, t)
    await createFolder('two', alpha.id, t)
    await createFolder('one', alpha.id, t)
    const betaOne = await createFolder('one', beta.id, t)
    await createFolder('deep', betaOne.id, t)

    const all = await call('GET', '/folders', undefined, t)
    assert.equal(all.status, 200, all.text)
    assert.deepEqual(paths(all), [
      'alpha',
      'alpha/one',
      'alpha/two',
      'beta',
      'beta/one',
      'beta/one/deep',
      'gamma',
    ])
    assert.equal(all.body.total, 7)
    assert.equal(all.body.limit, 100)
    assert.equal(all.body.offset, 0)
    const listedGamma = (all.body.data as Folder[]).find((f) => f.id === gamma.id)
    assert.deepEqual(listedGamma, gamma, 'list entries have the same shape as GET')

    const children = await call('GET', `/folders?parentId=${alpha.id}`, undefined, t)
    assert.equal(children.status, 200, children.text)
    assert.deepEqual(paths(children), ['alpha/one', 'alpha/two'])
    assert.equal(children.body.total, 2)
    assert.ok((children.body.data as Folder[]).every((f) => f.parentId === alpha.id))

    const grandchildren = await call('GET', `/folders?parentId=${beta.id}`, undefined, t)
    assert.deepEqual(paths(grandchildren), ['beta/one'], 'one level only')

    const roots = await call('GET', '/folders?parentId=root', undefined, t)
    assert.deepEqual(paths(roots), ['alpha', 'beta', 'gamma'])
    assert.equal(roots.body.total, 3)

    const page = await call('GET', '/folders?limit=2&offset=2', undefined, t)
    assert.equal(page.status, 200, page.text)
    assert.deepEqual(paths(page), ['alpha/two', 'beta'])
    assert.deepEqual([page.body.total, page.body.limit, page.body.offset], [7, 2, 2])

    const last = await call('GET', '/folders?limit=3&offset=6', undefined, t)
    assert.deepEqual(paths(last), ['gamma'])
    assert.equal(last.body.total, 7)

    const past = await call('GET', '/folders?limit=5&offset=50', undefined, t)
    assert.equal(past.status, 200, past.text)
    assert.deepEqual(past.body.data, [])
    assert.equal(past.body.total, 7, 'a page past the end still counts every folder')

    const rootPage = await call('GET', '/folders?parentId=root&limit=1&offset=1', undefined, t)
    assert.deepEqual(paths(rootPage), ['beta'])
    assert.equal(rootPage.body.total, 3)

    const empty = await call('GET', `/folders?parentId=${gamma.id}`, undefined, t)
    assert.equal(empty.status, 200, empty.text)
    assert.deepEqual([empty.body.data, empty.body.total], [[], 0])

    for (const query of ['limit=0', 'limit=1001', 'offset=-1', 'parentId=nope', 'other=1']) {
      expectError(await call('GET', `/folders?${query}`, undefined, t), 400, 'validation_failed', query)
    }
  })

  test('rename: the folder and every descendant get the new path', async () => {
    const t = await svc.createTenant()
    const [a, b, c] = await createChain(3, 'n', t)
    const renamed = await call('PATCH', `/folders/${b!.id}`, { name: 'middle' }, t)
    assert.equal(renamed.status, 200, renamed.text)
    assert.equal(renamed.body.name, 'middle')
    assert.equal(renamed.body.path, 'n1/middle')
    assert.equal(renamed.body.parentId, a!.id, 'a rename keeps the parent')
    assert.equal((await getFolder(c!.id, t)).path, 'n1/middle/n3')

    const top = await call('PATCH', `/folders/${a!.id}`, { name: 'root-renamed' }, t)
    assert.equal(top.status, 200, top.text)
    const all = await call('GET', '/folders', undefined, t)
    assert.deepEqual(paths(all), ['root-renamed', 'root-renamed/middle', 'root-renamed/middle/n3'])
    assert.equal((await folderRow(b!.id))!.name, 'middle')
  })

  test('move under another folder, then back to the top with parentId null; a subtree moves whole', async () => {
    const t = await svc.createTenant()
    const [a, b, c] = await createChain(3, 'm', t)
    const z = await createFolder('z', null, t)
    const secret = await createSecret('inside', c!.id, t)

    const moved = await call('PATCH', `/folders/${b!.id}`, { parentId: z.id }, t)
    assert.equal(moved.status, 200, moved.text)
    assert.equal(moved.body.parentId, z.id)
    assert.equal(moved.body.path, 'z/m2')
    assert.equal((await getFolder(c!.id, t)).path, 'z/m2/m3')
    assert.equal((await folderRow(b!.id))!.parent_id, z.id)
    assert.equal((await secretRow(secret))!.folder_id, c!.id, 'secrets stay in their folder')
    const underA = await call('GET', `/folders?parentId=${a!.id}`, undefined, t)
    assert.deepEqual(underA.body.data, [])

    // Moving and renaming at once.
    const both = await call('PATCH', `/folders/${b!.id}`, { parentId: a!.id, name: 'renamed' }, t)
    assert.equal(both.status, 200, both.text)
    assert.equal(both.body.path, 'm1/renamed')

    const toTop = await call('PATCH', `/folders/${b!.id}`, { parentId: null }, t)
    assert.equal(toTop.status, 200, toTop.text)
    assert.equal(toTop.body.parentId, null)
    assert.equal(toTop.body.path, 'renamed')
    assert.equal((await folderRow(b!.id))!.parent_id, null)
    assert.equal((await getFolder(c!.id, t)).path, 'renamed/m3')
    const roots = await call('GET', '/folders?parentId=root', undefined, t)
    assert.deepEqual(paths(roots), ['m1', 'renamed', 'z'])
  })

  test('a folder cannot move into itself or a descendant (409 folder_cycle); nothing changes', async () => {
    const t = await svc.createTenant()
    const [a, b, c, d] = await createChain(4, 'c', t)
    for (const [target, what] of [
      [a!, 'itself'],
      [b!, 'its child'],
      [d!, 'a deep descendant'],
    ] as const) {
      const res = await call('PATCH', `/folders/${a!.id}`, { parentId: target.id }, t)
      expectError(res, 409, 'folder_cycle', `a into ${what}`)
    }
    expectError(
      await call('PATCH', `/folders/${b!.id}`, { parentId: c!.id }, t),
      409,
      'folder_cycle',
      'b into c',
    )
    expectError(
      await call('PATCH', `/folders/${c!.id}`, { parentId: c!.id }, t),
      409,
      'folder_cycle',
      'c into c',
    )
    // A rename that comes with a refused move is not applied either.
    const combined = await call('PATCH', `/folders/${a!.id}`, { name: 'new', parentId: d!.id }, t)
    expectError(combined, 409, 'folder_cycle', 'rename and cycle')

    const rows = await svc.sql<{ id: string; parent_id: string | null; name: string }[]>`
      SELECT id, parent_id, name FROM secret_folders WHERE tenant_id = ${t.tenantId}`
    const byId = new Map(rows.map((r) => [r.id, r]))
    assert.equal(byId.get(a!.id)!.parent_id, null)
    assert.equal(byId.get(a!.id)!.name, 'c1')
    assert.equal(byId.get(b!.id)!.parent_id, a!.id)
    assert.equal(byId.get(c!.id)!.parent_id, b!.id)
    assert.equal((await getFolder(d!.id, t)).path, 'c1/c2/c3/c4')
    assert.equal(
      (await auditRecords(t.tenantId, 'folders.update')).length,
      0,
      'refused changes are not audited',
    )

    // Moving down the tree the other way (a descendant up to the top, then the old ancestor into it) is fine.
    assert.equal((await call('PATCH', `/folders/${c!.id}`, { parentId: null }, t)).status, 200)
    const ok = await call('PATCH', `/folders/${a!.id}`, { parentId: d!.id }, t)
    assert.equal(ok.status, 200, ok.text)
    assert.equal(ok.body.path, 'c3/c4/c1')
  })

  test('depth limit: 20 levels can be created, a 21st is 409 folder_too_deep', async () => {
    const t = await svc.createTenant()
    const chain = await createChain(20, 'd', t)
    const deepest = chain.at(-1)!
    assert.equal(deepest.path.split('/').length, 20)
    assert.equal(deepest.path, Array.from({ length: 20 }, (_, i) => `d${i + 1}`).join('/'))
    const refused = await call('POST', '/folders', { name: 'd21', parentId: deepest.id }, t)
    expectError(refused, 409, 'folder_too_deep', 'level 21')
    assert.equal(refused.body.maxDepth, 20)
    const [row] = await svc.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM secret_folders WHERE tenant_id = ${t.tenantId}`
    assert.equal(row!.n, 20, 'nothing was created')
    // Level 20 may still get siblings; secrets can live at level 20.
    await createFolder('sibling', chain[18]!.id, t)
    await createSecret('at-the-bottom', deepest.id, t)
  })

  test('depth limit: moving a subtree so that its deepest folder would be below level 20 is 409 folder_too_deep', async () => {
    const t = await svc.createTenant()
    const chain = await createChain(19, 'l', t)
    const [x, y] = await createChain(2, 'sub', t)
    // x is level 1 with a child: under level 19 its child would be level 21.
    const refused = await call('PATCH', `/folders/${x!.id}`, { parentId: chain[18]!.id }, t)
    expectError(refused, 409, 'folder_too_deep', 'x under level 19')
    assert.equal(refused.body.maxDepth, 20)
    assert.equal((await folderRow(x!.id))!.parent_id, null, 'not moved')
    // The same subtree fits under level 18: its child lands at exactly level 20.
    const moved = await call('PATCH', `/folders/${x!.id}`, { parentId: chain[17]!.id }, t)
    assert.equal(moved.status, 200, moved.text)
    assert.equal((await getFolder(y!.id, t)).path.split('/').length, 20)
    // The chain's top now carries a subtree 20 levels high: under any folder it would be too deep.
    const top = await createFolder('top', null, t)
    const carried = await call('PATCH', `/folders/${chain[0]!.id}`, { parentId: top.id }, t)
    expectError(carried, 409, 'folder_too_deep', 'a 20-high subtree under a top folder')
    assert.equal((await folderRow(chain[0]!.id))!.parent_id, null)
    // Creating under the moved subtree's bottom is refused as well.
    expectError(
      await call('POST', '/folders', { name: 'below', parentId: y!.id }, t),
      409,
      'folder_too_deep',
      'below level 20',
    )
  })

  test('delete: an empty folder is 204 and gone; a folder with subfolders or live secrets is 409 folder_not_empty with counts', async () => {
    const t = await svc.createTenant()
    const empty = await createFolder('empty', null, t)
    const deleted = await call('DELETE', `/folders/${empty.id}`, undefined, t)
    assert.equal(deleted.status, 204, deleted.text)
    assert.equal(deleted.text, '')
    assert.equal(await folderRow(empty.id), undefined)
    expectError(
      await call('GET', `/folders/${empty.id}`, undefined, t),
      404,
      'folder_not_found',
      'after deletion',
    )
    expectError(await call('DELETE', `/folders/${empty.id}`, undefined, t), 404, 'folder_not_found', 'twice')

    const full = await createFolder('full', null, t)
    await createFolder('s1', full.id, t)
    await createFolder('s2', full.id, t)
    await createSecret('one', full.id, t)
    const refused = await call('DELETE', `/folders/${full.id}`, undefined, t)
    expectError(refused, 409, 'folder_not_empty', 'subfolders and a secret')
    assert.equal(refused.body.subfolders, 2)
    assert.equal(refused.body.secrets, 1)

    const secretsOnly = await createFolder('secrets-only', null, t)
    await createSecret('a', secretsOnly.id, t)
    await createSecret('b', secretsOnly.id, t)
    const refused2 = await call('DELETE', `/folders/${secretsOnly.id}`, undefined, t)
    expectError(refused2, 409, 'folder_not_empty', 'secrets only')
    assert.deepEqual([refused2.body.subfolders, refused2.body.secrets], [0, 2])

    const foldersOnly = await createFolder('folders-only', null, t)
    await createFolder('child', foldersOnly.id, t)
    const refused3 = await call('DELETE', `/folders/${foldersOnly.id}`, undefined, t)
    expectError(refused3, 409, 'folder_not_empty', 'a subfolder only')
    assert.deepEqual([refused3.body.subfolders, refused3.body.secrets], [1, 0])

    for (const id of [full.id, secretsOnly.id, foldersOnly.id]) assert.ok(await folderRow(id), 'still there')
    assert.equal((await auditRecords(t.tenantId, 'folders.delete')).length, 1, 'only the empty one')
  })

  test('a folder whose only secrets are deleted can be deleted; those secrets restore to the top level', async () => {
    const t = await svc.createTenant()
    const folder = await createFolder('f', null, t)
    const plain = await createSecret('plain', folder.id, t)
    const clashing = await createSecret('clash', folder.id, t)
    assert.equal((await call('DELETE', `/secrets/${plain}`, undefined, t)).status, 200)
    assert.equal((await call('DELETE', `/secrets/${clashing}`, undefined, t)).status, 200)
    // A live top-level secret with the name of one of them.
    const liveClash = await createSecret('clash', null, t)

    const deleted = await call('DELETE', `/folders/${folder.id}`, undefined, t)
    assert.equal(deleted.status, 204, deleted.text)
    assert.equal(await folderRow(folder.id), undefined)
    for (const id of [plain, clashing]) {
      const row = (await secretRow(id))!
      assert.equal(row.folder_id, null, 'moved to the top level')
      assert.notEqual(row.deleted_at, null, 'still deleted')
    }
    const trash = await call('GET', '/secrets?deleted=true&include=folderId', undefined, t)
    assert.deepEqual(
      (trash.body.data as { id: string; folderId: string | null }[]).map((s) => [s.id, s.folderId]).sort(),
      [
        [clashing, null],
        [plain, null],
      ].sort(),
    )

    const restored = await call('POST', `/secrets/${plain}/restore`, undefined, t)
    assert.equal(restored.status, 200, restored.text)
    assert.equal(restored.body.folderId, null)
    const root = await call('GET', '/secrets?folderId=root', undefined, t)
    assert.deepEqual(ids(root).sort(), [liveClash, plain].sort())

    // The other one's name is taken at the top level now.
    expectError(
      await call('POST', `/secrets/${clashing}/restore`, undefined, t),
      409,
      'secret_name_taken',
      'restore',
    )
    assert.notEqual((await secretRow(clashing))!.deleted_at, null)
  })

  test('unknown folder ids are 404 folder_not_found in a path, a body or a filter', async () => {
    const t = await svc.createTenant()
    const unknown = randomUUID()
    const own = await createFolder('own', null, t)
    const secret = await createSecret('s', null, t)
    const probes: [string, string, unknown][] = [
      ['GET', `/folders/${unknown}`, undefined],
      ['PATCH', `/folders/${unknown}`, { name: 'x' }],
      ['DELETE', `/folders/${unknown}`, undefined],
      ['POST', '/folders', { name: 'orphan', parentId: unknown }],
      ['PATCH', `/folders/${own.id}`, { parentId: unknown }],
      ['POST', '/secrets', { name: 'orphan', value: 'v', folderId: unknown }],
      ['PATCH', `/secrets/${secret}`, { folderId: unknown }],
      ['POST', '/secrets/move', { secretIds: [secret], folderId: unknown }],
      ['GET', `/secrets?folderId=${unknown}`, undefined],
    ]
    for (const [method, path, body] of probes) {
      expectError(await call(method, path, body, t), 404, 'folder_not_found', `${method} ${path}`)
    }
    assert.equal((await folderRow(own.id))!.parent_id, null)
    assert.equal((await secretRow(secret))!.folder_id, null)
    const [count] = await svc.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM secrets WHERE tenant_id = ${t.tenantId}`
    assert.equal(count!.n, 1, 'no orphan secret was created')
  })

  test('GET /folders?parentId= an unknown or another tenant folder is 404 folder_not_found, like the secrets filter', async () => {
    const t = await svc.createTenant()
    const other = await svc.createTenant()
    const theirs = await createFolder('theirs', null, other)
    await createFolder('child', theirs.id, other)
    const outcomes: [string, number, string | undefined][] = []
    for (const [what, id] of [
      ['unknown', randomUUID()],
      ['another tenant', theirs.id],
    ]) {
      const res = await call('GET', `/folders?parentId=${id}`, undefined, t)
      assert.ok(!res.text.includes('child'), 'never the other tenant folders')
      outcomes.push([what!, res.status, res.body?.error])
      // The secrets list filter answers this way for the same ids.
      const secrets = await call('GET', `/secrets?folderId=${id}`, undefined, t)
      expectError(secrets, 404, 'folder_not_found', `secrets filter, ${what}`)
    }
    assert.deepEqual(outcomes, [
      ['unknown', 404, 'folder_not_found'],
      ['another tenant', 404, 'folder_not_found'],
    ])
  })

  test('audit: folders.create, folders.update (with the resulting parent and name) and folders.delete, by the caller, naming the folder', async () => {
    const t = await svc.createTenant()
    const parent = await createFolder('parent', null, t)
    const child = await createFolder('child', parent.id, t)
    assert.equal((await call('PATCH', `/folders/${child.id}`, { name: 'renamed' }, t)).status, 200)
    assert.equal((await call('PATCH', `/folders/${child.id}`, { parentId: null }, t)).status, 200)
    assert.equal((await call('DELETE', `/folders/${child.id}`, undefined, t)).status, 204)
    const actor = `apikey:${t.apiKeyId}`

    const creates = await auditRecords(t.tenantId, 'folders.create')
    assert.deepEqual(
      creates.map((r) => [r.actor, r.resource, r.outcome, r.details]),
      [
        [actor, `folder:${parent.id}`, 'success', { parentId: null }],
        [actor, `folder:${child.id}`, 'success', { parentId: parent.id }],
      ],
    )
    const updates = await auditRecords(t.tenantId, 'folders.update', `folder:${child.id}`)
    assert.deepEqual(
      updates.map((r) => [r.actor, r.outcome, r.details]),
      [
        [actor, 'success', { parentId: parent.id, name: 'renamed' }],
        [actor, 'success', { parentId: null, name: 'renamed' }],
      ],
    )
    const deletes = await auditRecords(t.tenantId, 'folders.delete')
    assert.deepEqual(
      deletes.map((r) => [r.actor, r.resource, r.outcome]),
      [[actor, `folder:${child.id}`, 'success']],
    )
  })
})

describe('secrets in folders', () => {
  test('create with folderId: the answer, GET and the stored row name the folder', async () => {
    const t = await svc.createTenant()
    const folder = await createFolder('f', null, t)
    const res = await call('POST', '/secrets', { name: 's', value: 'v', folderId: folder.id }, t)
    assert.equal(res.status, 201, res.text)
    assert.equal(res.body.folderId, folder.id)
    assert.equal(res.body.value, undefined, 'a write answer carries no value')
    const got = await call('GET', `/secrets/${res.body.id}?include=folderId`, undefined, t)
    assert.equal(got.body.folderId, folder.id)
    assert.deepEqual(await secretRow(res.body.id), {
      tenant_id: t.tenantId,
      folder_id: folder.id,
      name: 's',
      deleted_at: null,
    })
    const top = await call('POST', '/secrets', { name: 's2', value: 'v' }, t)
    assert.equal(top.body.folderId, null, 'no folderId: the top level')
  })

  test('names are unique per folder; a deleted secret frees its name and its restore then conflicts', async () => {
    const t = await svc.createTenant()
    const f1 = await createFolder('f1', null, t)
    const f2 = await createFolder('f2', null, t)
    const first = await createSecret('db-password', f1.id, t)
    await createSecret('db-password', f2.id, t)
    await createSecret('db-password', null, t)
    expectError(
      await call('POST', '/secrets', { name: 'db-password', value: 'x', folderId: f1.id }, t),
      409,
      'secret_name_taken',
      'same folder',
    )
    expectError(
      await call('POST', '/secrets', { name: 'db-password', value: 'x' }, t),
      409,
      'secret_name_taken',
      'top level',
    )
    // A rename onto a name taken in the same folder.
    const other = await createSecret('other', f1.id, t)
    expectError(
      await call('PATCH', `/secrets/${other}`, { name: 'db-password' }, t),
      409,
      'secret_name_taken',
      'rename',
    )
    assert.equal((await secretRow(other))!.name, 'other')

    const deleted = await call('DELETE', `/secrets/${first}`, undefined, t)
    assert.equal(deleted.status, 200, deleted.text)
    const replacement = await createSecret('db-password', f1.id, t)
    assert.notEqual(replacement, first)

    expectError(
      await call('POST', `/secrets/${first}/restore`, undefined, t),
      409,
      'secret_name_taken',
      'restore',
    )
    assert.notEqual((await secretRow(first))!.deleted_at, null, 'still deleted')
    const inF1 = await call('GET', `/secrets?folderId=${f1.id}`, undefined, t)
    assert.deepEqual(ids(inF1).sort(), [replacement, other].sort())

    // Once the name is free again, the restore goes through.
    assert.equal((await call('DELETE', `/secrets/${replacement}?permanent=true`, undefined, t)).status, 204)
    const restored = await call('POST', `/secrets/${first}/restore`, undefined, t)
    assert.equal(restored.status, 200, restored.text)
    assert.equal(restored.body.folderId, f1.id, 'restored in its folder')
  })

  test('list filter: folderId=<id> and root list direct children only', async () => {
    const t = await svc.createTenant()
    const parent = await createFolder('parent', null, t)
    const child = await createFolder('child', parent.id, t)
    const inParent = await createSecret('in-parent', parent.id, t)
    const inParent2 = await createSecret('in-parent-2', parent.id, t)
    const inChild = await createSecret('in-child', child.id, t)
    const atTop = await createSecret('at-top', null, t)
    const deletedInParent = await createSecret('deleted', parent.id, t)
    await call('DELETE', `/secrets/${deletedInParent}`, undefined, t)

    const p = await call('GET', `/secrets?folderId=${parent.id}&include=folderId`, undefined, t)
    assert.equal(p.status, 200, p.text)
    assert.deepEqual(ids(p), [inParent, inParent2], 'by name, without the subfolder or deleted secrets')
    assert.equal(p.body.total, 2)
    assert.ok((p.body.data as { folderId: string }[]).every((s) => s.folderId === parent.id))

    const c = await call('GET', `/secrets?folderId=${child.id}`, undefined, t)
    assert.deepEqual(ids(c), [inChild])

    const root = await call('GET', '/secrets?folderId=root', undefined, t)
    assert.deepEqual(ids(root), [atTop])
    assert.equal(root.body.total, 1)

    const everything = await call('GET', '/secrets', undefined, t)
    assert.deepEqual(ids(everything).sort(), [inParent, inParent2, inChild, atTop].sort())

    const paged = await call('GET', `/secrets?folderId=${parent.id}&limit=1&offset=1`, undefined, t)
    assert.deepEqual(ids(paged), [inParent2])
    assert.equal(paged.body.total, 2)

    const trash = await call('GET', `/secrets?folderId=${parent.id}&deleted=true`, undefined, t)
    assert.deepEqual(ids(trash), [deletedInParent])

    const emptyFolder = await createFolder('empty', null, t)
    const none = await call('GET', `/secrets?folderId=${emptyFolder.id}`, undefined, t)
    assert.equal(none.status, 200, none.text)
    assert.deepEqual([none.body.data, none.body.total], [[], 0])
  })

  test('PATCH folderId moves a secret; a name taken in the destination is 409; null moves to the top', async () => {
    const t = await svc.createTenant()
    const a = await createFolder('a', null, t)
    const b = await createFolder('b', null, t)
    const secret = await createSecret('token', a.id, t)
    const moved = await call('PATCH', `/secrets/${secret}`, { folderId: b.id }, t)
    assert.equal(moved.status, 200, moved.text)
    assert.equal(moved.body.folderId, b.id)
    assert.equal((await secretRow(secret))!.folder_id, b.id)
    assert.deepEqual(ids(await call('GET', `/secrets?folderId=${a.id}`, undefined, t)), [])
    assert.deepEqual(ids(await call('GET', `/secrets?folderId=${b.id}`, undefined, t)), [secret])

    await createSecret('token', a.id, t)
    expectError(
      await call('PATCH', `/secrets/${secret}`, { folderId: a.id }, t),
      409,
      'secret_name_taken',
      'clash',
    )
    expectError(
      await call('PATCH', `/secrets/${secret}`, { folderId: a.id, value: 'new value' }, t),
      409,
      'secret_name_taken',
      'clash with a new value',
    )
    const [row] = await svc.sql<{ folder_id: string; current_version: number }[]>`
      SELECT folder_id, current_version FROM secrets WHERE id = ${secret}`
    assert.deepEqual({ ...row }, { folder_id: b.id, current_version: 1 }, 'nothing changed')
    // Moving with a rename that avoids the clash is fine.
    const renamed = await call('PATCH', `/secrets/${secret}`, { folderId: a.id, name: 'token-2' }, t)
    assert.equal(renamed.status, 200, renamed.text)
    assert.equal(renamed.body.folderId, a.id)

    const top = await call('PATCH', `/secrets/${secret}`, { folderId: null }, t)
    assert.equal(top.status, 200, top.text)
    assert.equal(top.body.folderId, null)
    assert.equal((await secretRow(secret))!.folder_id, null)

    const updates = await auditRecords(t.tenantId, 'secrets.update', `secret:${secret}`)
    assert.deepEqual(
      updates.map((r) => r.details),
      [{ fields: 'folderId' }, { fields: 'folderId,name' }, { fields: 'folderId' }],
    )
  })

  test('POST /secrets/move moves every secret named; audited once per secret', async () => {
    const t = await svc.createTenant()
    const src = await createFolder('src', null, t)
    const dest = await createFolder('dest', null, t)
    const s1 = await createSecret('s1', src.id, t)
    const s2 = await createSecret('s2', null, t)
    const s3 = await createSecret('s3', dest.id, t)
    const res = await call('POST', '/secrets/move', { secretIds: [s1, s2, s3], folderId: dest.id }, t)
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(res.body, { moved: 3 })
    for (const id of [s1, s2, s3]) assert.equal((await secretRow(id))!.folder_id, dest.id)
    assert.deepEqual(ids(await call('GET', `/secrets?folderId=${dest.id}`, undefined, t)), [s1, s2, s3])

    const moves = await auditRecords(t.tenantId, 'secrets.move')
    assert.deepEqual(
      moves.map((r) => [r.resource, r.actor, r.outcome, r.details]).sort(),
      [s1, s2, s3]
        .map((id) => [`secret:${id}`, `apikey:${t.apiKeyId}`, 'success', { folderId: dest.id }])
        .sort(),
    )

    const toTop = await call('POST', '/secrets/move', { secretIds: [s1, s2], folderId: null }, t)
    assert.equal(toTop.status, 200, toTop.text)
    assert.deepEqual(toTop.body, { moved: 2 })
    assert.equal((await secretRow(s1))!.folder_id, null)
    assert.equal((await secretRow(s2))!.folder_id, null)
    assert.equal((await secretRow(s3))!.folder_id, dest.id)
    assert.equal((await auditRecords(t.tenantId, 'secrets.move')).length, 5)

    for (const body of [
      { secretIds: [], folderId: null },
      { secretIds: [s1, s1], folderId: null },
      { secretIds: [s1] },
      { secretIds: ['not-a-uuid'], folderId: null },
    ]) {
      expectError(
        await call('POST', '/secrets/move', body, t),
        400,
        'validation_failed',
        JSON.stringify(body),
      )
    }
  })

  test('POST /secrets/move is all or nothing: an unknown, deleted or other-tenant id is 404 with missing, nothing moves', async () => {
    const t = await svc.createTenant()
    const other = await svc.createTenant()
    const dest = await createFolder('dest', null, t)
    const s1 = await createSecret('s1', null, t)
    const s2 = await createSecret('s2', null, t)
    const gone = await createSecret('gone', null, t)
    await call('DELETE', `/secrets/${gone}`, undefined, t)
    const theirs = await createSecret('theirs', null, other)
    const unknown = randomUUID()
    const initial = await snapshot(t.tenantId)
    const otherBefore = await snapshot(other.tenantId)

    for (const [missing, what] of [
      [[unknown], 'an unknown id'],
      [[theirs], 'another tenant secret'],
      [[gone], 'a deleted secret'],
      [[unknown, theirs], 'several'],
    ] as const) {
      const res = await call(
        'POST',
        '/secrets/move',
        { secretIds: [s1, ...missing, s2], folderId: dest.id },
        t,
      )
      expectError(res, 404, 'secret_not_found', what)
      assert.deepEqual(res.body.missing, missing, what)
    }
    assert.deepEqual(await snapshot(t.tenantId), initial, 'nothing moved')
    assert.deepEqual(await snapshot(other.tenantId), otherBefore)
    assert.equal((await auditRecords(t.tenantId, 'secrets.move')).length, 0)
  })

  test('POST /secrets/move is all or nothing: a name clash in the destination is 409, nothing moves', async () => {
    const t = await svc.createTenant()
    const dest = await createFolder('dest', null, t)
    const a = await createFolder('a', null, t)
    const b = await createFolder('b', null, t)
    await createSecret('dup', dest.id, t)
    const free = await createSecret('free', a.id, t)
    const clashing = await createSecret('dup', a.id, t)
    const twinA = await createSecret('twin', a.id, t)
    const twinB = await createSecret('twin', b.id, t)
    const initial = await snapshot(t.tenantId)

    const res = await call('POST', '/secrets/move', { secretIds: [free, clashing], folderId: dest.id }, t)
    expectError(res, 409, 'secret_name_taken', 'with the destination')
    // Two secrets of the same name from different folders cannot land in one folder.
    const twins = await call(
      'POST',
      '/secrets/move',
      { secretIds: [free, twinA, twinB], folderId: dest.id },
      t,
    )
    expectError(twins, 409, 'secret_name_taken', 'with each other')
    const toTop = await call('POST', '/secrets/move', { secretIds: [twinA, twinB], folderId: null }, t)
    expectError(toTop, 409, 'secret_name_taken', 'at the top level')

    assert.deepEqual(await snapshot(t.tenantId), initial, 'nothing moved')
    assert.equal((await secretRow(free))!.folder_id, a.id)
    assert.equal((await auditRecords(t.tenantId, 'secrets.move')).length, 0)
  })
})

describe('tenant isolation on every secrets and folders route', () => {
  let a: TenantWithKey
  let b: TenantWithKey
  /** Tenant A's fixtures. */
  let fa: Folder
  let faSub: Folder
  let sa: string
  let saTop: string
  let saDeleted: string
  const saName = uniqueName('a-secret')
  const faName = uniqueName('a-folder')
  /** Tenant B's own fixtures. */
  let fb: Folder
  let sb: string

  before(async () => {
    a = await svc.createTenant()
    b = await svc.createTenant()
    fa = await createFolder(faName, null, a)
    faSub = await createFolder('sub', fa.id, a)
    sa = await createSecret(saName, fa.id, a, {
      totp: { secret: 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ' },
      notes: 'n',
    })
    assert.equal((await call('PATCH', `/secrets/${sa}`, { value: 'second value' }, a)).status, 200)
    saTop = await createSecret(`${saName}-top`, null, a)
    saDeleted = await createSecret(`${saName}-deleted`, fa.id, a)
    assert.equal((await call('DELETE', `/secrets/${saDeleted}`, undefined, a)).status, 200)
    fb = await createFolder('b-folder', null, b)
    sb = await createSecret('b-secret', fb.id, b)
  })

  /** Nothing of tenant A appears in an answer to B. */
  function revealsNothingOfA(res: HttpResult, what: string) {
    for (const marker of [sa, saTop, saDeleted, fa.id, faSub.id, saName, faName]) {
      assert.ok(!res.text.includes(marker), `${what} reveals ${marker}: ${res.text}`)
    }
  }

  test("every secret route answers 404 secret_not_found to another tenant's secret ids and version numbers", async () => {
    const aBefore = await snapshot(a.tenantId)
    const aAudit = await contentAuditCount(a.tenantId)
    const probes: [string, string, unknown][] = [
      ['GET', `/secrets/${sa}`, undefined],
      ['GET', `/secrets/${sa}?include=all`, undefined],
      ['GET', `/secrets/${saTop}?include=metadata`, undefined],
      ['GET', `/secrets/${saDeleted}`, undefined],
      ['PATCH', `/secrets/${sa}`, { value: 'stolen' }],
      ['PATCH', `/secrets/${sa}`, { folderId: fb.id }],
      ['PATCH', `/secrets/${saTop}`, { name: 'renamed', isActive: false }],
      ['DELETE', `/secrets/${sa}`, undefined],
      ['DELETE', `/secrets/${saTop}?permanent=true`, undefined],
      ['DELETE', `/secrets/${saDeleted}?permanent=true`, undefined],
      ['POST', `/secrets/${saDeleted}/restore`, undefined],
      ['POST', `/secrets/${sa}/restore`, undefined],
      ['GET', `/secrets/${sa}/versions`, undefined],
      ['GET', `/secrets/${sa}/versions/1`, undefined],
      ['GET', `/secrets/${sa}/versions/2?include=all`, undefined],
      ['GET', `/secrets/${saDeleted}/versions/1`, undefined],
      ['GET', `/secrets/${sa}/totp`, undefined],
    ]
    for (const [method, path, body] of probes) {
      const res = await call(method, path, body, b)
      expectError(res, 404, 'secret_not_found', `${method} ${path}`)
      revealsNothingOfA(res, `${method} ${path}`)
    }
    const move = await call('POST', '/secrets/move', { secretIds: [sa], folderId: null }, b)
    expectError(move, 404, 'secret_not_found', 'move')
    assert.deepEqual(move.body.missing, [sa], 'the caller only learns what it asked for')

    // A's version numbers on B's own secret are B's: version 2 does not exist there.
    expectError(
      await call('GET', `/secrets/${sb}/versions/2?include=all`, undefined, b),
      404,
      'secret_version_not_found',
      'B secret, A version number',
    )
    const own = await call('GET', `/secrets/${sb}/versions/1?include=all`, undefined, b)
    assert.equal(own.status, 200, own.text)
    assert.equal(own.body.value, 'value of b-secret')

    assert.deepEqual(await snapshot(a.tenantId), aBefore, "A's secrets are unchanged")
    assert.equal(await contentAuditCount(a.tenantId), aAudit, 'nothing was recorded in A')
    // A still sees its secret as it was.
    const mine = await call('GET', `/secrets/${sa}?include=all`, undefined, a)
    assert.equal(mine.body.value, 'second value')
  })

  test("every folder route answers 404 folder_not_found to another tenant's folder ids", async () => {
    const aBefore = await snapshot(a.tenantId)
    const bBefore = await snapshot(b.tenantId)
    const probes: [string, string, unknown][] = [
      ['GET', `/folders/${fa.id}`, undefined],
      ['GET', `/folders/${faSub.id}`, undefined],
      ['PATCH', `/folders/${fa.id}`, { name: 'stolen' }],
      ['PATCH', `/folders/${faSub.id}`, { parentId: null }],
      ['PATCH', `/folders/${faSub.id}`, { parentId: fb.id }],
      ['DELETE', `/folders/${faSub.id}`, undefined],
      ['DELETE', `/folders/${fa.id}`, undefined],
      // B's own things pointed at A's folders.
      ['POST', '/folders', { name: 'intruder', parentId: fa.id }],
      ['PATCH', `/folders/${fb.id}`, { parentId: fa.id }],
      ['POST', '/secrets', { name: 'intruder', value: 'v', folderId: fa.id }],
      ['PATCH', `/secrets/${sb}`, { folderId: faSub.id }],
      ['POST', '/secrets/move', { secretIds: [sb], folderId: fa.id }],
      ['GET', `/secrets?folderId=${fa.id}`, undefined],
      ['GET', `/secrets?folderId=${fa.id}&deleted=true`, undefined],
    ]
    for (const [method, path, body] of probes) {
      const res = await call(method, path, body, b)
      expectError(res, 404, 'folder_not_found', `${method} ${path}`)
      revealsNothingOfA(res, `${method} ${path}`)
    }
    // The folder list filtered on A's folder shows none of A's folders (whatever the status).
    revealsNothingOfA(await call('GET', `/folders?parentId=${fa.id}`, undefined, b), 'folder list filter')

    assert.deepEqual(await snapshot(a.tenantId), aBefore, "A's folders and secrets are unchanged")
    assert.deepEqual(await snapshot(b.tenantId), bBefore, 'nothing of B was placed in A')
    const [placed] = await svc.sql<{ n: number }[]>`
      SELECT (SELECT count(*) FROM secret_folders WHERE parent_id IN (${fa.id}, ${faSub.id}) AND tenant_id <> ${a.tenantId})
           + (SELECT count(*) FROM secrets WHERE folder_id IN (${fa.id}, ${faSub.id}) AND tenant_id <> ${a.tenantId})
           AS n`
    assert.equal(Number(placed!.n), 0)
  })

  test("B cannot move A's secrets, alone or among its own", async () => {
    const initial = await snapshot(a.tenantId)
    const mixed = await call('POST', '/secrets/move', { secretIds: [sb, sa, saTop], folderId: null }, b)
    expectError(mixed, 404, 'secret_not_found', 'mixed')
    assert.deepEqual(mixed.body.missing, [sa, saTop])
    assert.equal((await secretRow(sb))!.folder_id, fb.id, "B's own secret did not move either")
    const intoOwn = await call('POST', '/secrets/move', { secretIds: [saTop], folderId: fb.id }, b)
    expectError(intoOwn, 404, 'secret_not_found', 'into a B folder')
    assert.deepEqual(await snapshot(a.tenantId), initial)
    assert.equal((await auditRecords(b.tenantId, 'secrets.move')).length, 0)
  })

  test("lists never show the other tenant's items", async () => {
    const bSecrets = [sb]
    for (const query of [
      '',
      '?include=all',
      '?deleted=true',
      `?search=${encodeURIComponent(saName)}`,
      '?folderId=root',
      `?folderId=${fb.id}`,
    ]) {
      const res = await call('GET', `/secrets${query}`, undefined, b)
      assert.equal(res.status, 200, `${query}: ${res.text}`)
      revealsNothingOfA(res, `GET /secrets${query}`)
      assert.ok(
        ids(res).every((id) => bSecrets.includes(id)),
        `${query}: only B's secrets`,
      )
    }
    for (const query of ['', '?parentId=root', `?parentId=${fb.id}`]) {
      const res = await call('GET', `/folders${query}`, undefined, b)
      assert.equal(res.status, 200, `${query}: ${res.text}`)
      revealsNothingOfA(res, `GET /folders${query}`)
    }
    assert.deepEqual(ids(await call('GET', '/folders', undefined, b)), [fb.id])
    assert.deepEqual(ids(await call('GET', '/secrets', undefined, b)), [sb])
    assert.equal((await call('GET', '/secrets', undefined, b)).body.total, 1)

    // And the other way round.
    const aFolders = await call('GET', '/folders', undefined, a)
    assert.ok(!ids(aFolders).includes(fb.id))
    assert.deepEqual(ids(aFolders).sort(), [fa.id, faSub.id].sort())
    const aSecrets = await call('GET', '/secrets?include=all', undefined, a)
    assert.ok(!aSecrets.text.includes(sb) && !aSecrets.text.includes('b-secret'))
  })

  test("B's folder and secret names do not clash with A's", async () => {
    const t = await svc.createTenant()
    const same = await createFolder(faName, null, t)
    assert.equal(same.path, faName)
    const sub = await createFolder('sub', same.id, t)
    assert.equal(sub.path, `${faName}/sub`)
    await createSecret(`${saName}-top`, null, t)
    await createSecret(saName, same.id, t)
    // A's deleted secret's name is free in A's folder, not something B could see or take.
    await createSecret(`${saName}-deleted`, same.id, t)
    const mine = await call('GET', '/folders', undefined, t)
    assert.deepEqual(paths(mine), [faName, `${faName}/sub`])
    assert.ok(!ids(mine).includes(fa.id))
  })
})

describe('scopes on every secrets and folders route', () => {
  let owner: TenantWithKey
  const keys: Record<'reader' | 'writer' | 'keysOnly', string> = { reader: '', writer: '', keysOnly: '' }
  let folder: Folder
  let emptyFolder: Folder
  let secret: string
  let deleted: string

  async function apiKey(scopes: Scope[]): Promise<string> {
    const res = await call('POST', '/api-keys', { name: uniqueName('scoped'), scopes }, owner)
    assert.equal(res.status, 201, res.text)
    assert.deepEqual(res.body.scopes, scopes)
    return res.body.key as string
  }

  before(async () => {
    owner = await svc.createTenant()
    folder = await createFolder('f', null, owner)
    emptyFolder = await createFolder('empty', null, owner)
    secret = await createSecret('s', folder.id, owner, {
      totp: { secret: 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ' },
    })
    assert.equal((await call('PATCH', `/secrets/${secret}`, { value: 'v2' }, owner)).status, 200)
    deleted = await createSecret('d', null, owner)
    assert.equal((await call('DELETE', `/secrets/${deleted}`, undefined, owner)).status, 200)
    keys.reader = await apiKey(['secrets:read'])
    keys.writer = await apiKey(['secrets:write'])
    keys.keysOnly = await apiKey(['keys:read', 'keys:write'])
  })

  /** Every GET route, each with what its success looks like. */
  const reads = (): [string, (res: HttpResult) => void][] => [
    ['/secrets', (res) => assert.ok(ids(res).includes(secret))],
    [`/secrets?folderId=${folder.id}&include=all`, (res) => assert.deepEqual(ids(res), [secret])],
    ['/secrets?deleted=true', (res) => assert.deepEqual(ids(res), [deleted])],
    [`/secrets/${secret}?include=all`, (res) => assert.equal(res.body.value, 'v2')],
    [
      `/secrets/${secret}/versions`,
      (res) =>
        assert.deepEqual(
          res.body.data.map((v: { version: number }) => v.version),
          [2, 1],
        ),
    ],
    [`/secrets/${secret}/versions/1?include=all`, (res) => assert.equal(res.body.value, 'value of s')],
    [`/secrets/${secret}/totp`, (res) => assert.match(res.body.code, /^\d{6}$/)],
    ['/folders', (res) => assert.deepEqual(paths(res), ['empty', 'f'])],
    ['/folders?parentId=root', (res) => assert.equal(res.body.total, 2)],
    [`/folders/${folder.id}`, (res) => assert.equal(res.body.path, 'f')],
  ]

  /** Every write route, with a body that would succeed with the right scope. */
  const writes = (): [string, string, unknown][] => [
    ['POST', '/secrets', { name: 'new', value: 'v', folderId: folder.id }],
    ['PATCH', `/secrets/${secret}`, { value: 'changed', folderId: null }],
    ['DELETE', `/secrets/${secret}`, undefined],
    ['DELETE', `/secrets/${secret}?permanent=true`, undefined],
    ['POST', `/secrets/${deleted}/restore`, undefined],
    ['POST', '/secrets/move', { secretIds: [secret], folderId: emptyFolder.id }],
    ['POST', '/folders', { name: 'new', parentId: folder.id }],
    ['PATCH', `/folders/${folder.id}`, { name: 'renamed', parentId: emptyFolder.id }],
    ['DELETE', `/folders/${emptyFolder.id}`, undefined],
  ]

  function expectScope(res: HttpResult, required: Scope, what: string) {
    expectError(res, 403, 'insufficient_scope', what)
    assert.equal(res.body.requiredScope, required, what)
  }

  test('secrets:read can make every GET', async () => {
    for (const [path, check] of reads()) {
      const res = await call('GET', path, undefined, keys.reader)
      assert.equal(res.status, 200, `GET ${path}: ${res.text}`)
      check(res)
    }
  })

  test('secrets:read gets 403 insufficient_scope naming secrets:write on every POST/PATCH/DELETE; nothing changes', async () => {
    const initial = await snapshot(owner.tenantId)
    const audited = await contentAuditCount(owner.tenantId)
    for (const [method, path, body] of writes()) {
      expectScope(await call(method, path, body, keys.reader), 'secrets:write', `${method} ${path}`)
    }
    assert.deepEqual(await snapshot(owner.tenantId), initial)
    assert.equal(await contentAuditCount(owner.tenantId), audited, 'no secrets.* or folders.* record')
    const denied = await svc.sql`
      SELECT details FROM audit_log WHERE tenant_id = ${owner.tenantId} AND action = 'authorization.denied'
        AND outcome = 'denied' AND details->>'requiredScope' = 'secrets:write'`
    assert.ok(denied.length >= writes().length, 'each refused write is recorded as denied')
  })

  test('secrets:write gets 403 insufficient_scope naming secrets:read on every GET, and can write', async () => {
    for (const [path] of reads()) {
      const res = await call('GET', path, undefined, keys.writer)
      expectScope(res, 'secrets:read', `GET ${path}`)
      assert.ok(!res.text.includes('v2') && !res.text.includes(secret), 'no data in the refusal')
    }
    const created = await call('POST', '/folders', { name: 'by-writer' }, keys.writer)
    assert.equal(created.status, 201, created.text)
    const removed = await call('DELETE', `/folders/${created.body.id}`, undefined, keys.writer)
    assert.equal(removed.status, 204, removed.text)
  })

  test('keys:read and keys:write get 403 on every secrets and folders route; nothing changes', async () => {
    const initial = await snapshot(owner.tenantId)
    const audited = await contentAuditCount(owner.tenantId)
    for (const [path] of reads()) {
      expectScope(await call('GET', path, undefined, keys.keysOnly), 'secrets:read', `GET ${path}`)
    }
    for (const [method, path, body] of writes()) {
      expectScope(await call(method, path, body, keys.keysOnly), 'secrets:write', `${method} ${path}`)
    }
    assert.deepEqual(await snapshot(owner.tenantId), initial)
    assert.equal(await contentAuditCount(owner.tenantId), audited)
    // The key itself works for what it was given.
    assert.equal((await call('GET', '/keys', undefined, keys.keysOnly)).status, 200)
  })
})

describe('concurrency', () => {
  test('10 parallel creates of one name in one folder: exactly one 201, the rest 409 secret_name_taken', async () => {
    const t = await svc.createTenant()
    const folder = await createFolder('f', null, t)
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        call('POST', '/secrets', { name: 'race', value: `v${i}`, folderId: folder.id }, t),
      ),
    )
    const statuses = results.map((r) => r.status).sort()
    assert.deepEqual(statuses, [201, ...Array<number>(9).fill(409)], results.map((r) => r.text).join('\n'))
    for (const res of results.filter((r) => r.status === 409))
      assert.equal(res.body.error, 'secret_name_taken')
    const rows = await svc.sql`SELECT id FROM secrets WHERE tenant_id = ${t.tenantId} AND name = 'race'`
    assert.equal(rows.length, 1)
    assert.equal(rows[0]!['id'], results.find((r) => r.status === 201)!.body.id)
    assert.equal((await auditRecords(t.tenantId, 'secrets.create')).length, 1)
  })

  test('10 parallel folder creates of one name: exactly one 201, the rest 409 folder_name_taken (nested and top level)', async () => {
    const t = await svc.createTenant()
    const parent = await createFolder('parent', null, t)
    for (const parentId of [parent.id, null]) {
      const results = await Promise.all(
        Array.from({ length: 10 }, () => call('POST', '/folders', { name: 'race', parentId }, t)),
      )
      const statuses = results.map((r) => r.status).sort()
      assert.deepEqual(statuses, [201, ...Array<number>(9).fill(409)], results.map((r) => r.text).join('\n'))
      for (const res of results.filter((r) => r.status === 409))
        assert.equal(res.body.error, 'folder_name_taken')
    }
    const rows =
      await svc.sql`SELECT id FROM secret_folders WHERE tenant_id = ${t.tenantId} AND name = 'race'`
    assert.equal(rows.length, 2)
  })

  test('parallel moves of folders into each other never make a cycle: one succeeds, the other is 409 folder_cycle', async () => {
    const t = await svc.createTenant()
    for (let round = 0; round < 5; round++) {
      const x = await createFolder(`x${round}`, null, t)
      const y = await createFolder(`y${round}`, null, t)
      const [rx, ry] = await Promise.all([
        call('PATCH', `/folders/${x.id}`, { parentId: y.id }, t),
        call('PATCH', `/folders/${y.id}`, { parentId: x.id }, t),
      ])
      assert.deepEqual([rx.status, ry.status].sort(), [200, 409], `round ${round}: ${rx.text} ${ry.text}`)
      const refused = rx.status === 409 ? rx : ry
      assert.equal(refused.body.error, 'folder_cycle')
      const rows = await svc.sql<{ id: string; parent_id: string | null }[]>`
        SELECT id, parent_id FROM secret_folders WHERE id IN (${x.id}, ${y.id})`
      assert.equal(rows.filter((r) => r.parent_id === null).length, 1, 'exactly one is still at the top')
      const [top, child] = rx.status === 200 ? [y, x] : [x, y]
      assert.equal((await getFolder(child.id, t)).path, `${top.name}/${child.name}`)
    }
    // Three folders moved in a ring at once: at least one move is refused and the tree stays a tree.
    for (let round = 0; round < 5; round++) {
      const ring = await Promise.all([0, 1, 2].map((i) => createFolder(`ring${round}-${i}`, null, t)))
      const results = await Promise.all(
        ring.map((f, i) => call('PATCH', `/folders/${f.id}`, { parentId: ring[(i + 1) % 3]!.id }, t)),
      )
      for (const res of results) assert.ok([200, 409].includes(res.status), res.text)
      const refused = results.filter((r) => r.status === 409)
      assert.equal(refused.length, 1, 'two of the three moves fit in a tree')
      assert.equal(refused[0]!.body.error, 'folder_cycle')
      for (const f of ring) {
        const path = (await getFolder(f.id, t)).path
        assert.ok(path.endsWith(f.name) && path.split('/').length <= 3, path)
      }
    }
    const all = await call('GET', '/folders', undefined, t)
    assert.equal(all.body.total, 10 + 15, 'every folder still has a path from the top')
  })

  test('deleting a folder while a secret is created in it: either the folder goes and the create is 404, or neither', async () => {
    const t = await svc.createTenant()
    for (let round = 0; round < 8; round++) {
      const folder = await createFolder(`f${round}`, null, t)
      const [removed, created] = await Promise.all([
        call('DELETE', `/folders/${folder.id}`, undefined, t),
        call('POST', '/secrets', { name: `s${round}`, value: 'v', folderId: folder.id }, t),
      ])
      if (removed.status === 204) {
        expectError(created, 404, 'folder_not_found', `round ${round}`)
        assert.equal(await folderRow(folder.id), undefined)
      } else {
        expectError(removed, 409, 'folder_not_empty', `round ${round}`)
        assert.equal(created.status, 201, created.text)
        assert.equal((await secretRow(created.body.id))!.folder_id, folder.id)
      }
    }
    const [orphans] = await svc.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM secrets s WHERE s.tenant_id = ${t.tenantId} AND s.folder_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM secret_folders f WHERE f.id = s.folder_id)`
    assert.equal(orphans!.n, 0)
  })

  test('parallel bulk moves of same-named secrets into one folder: one 200, the other 409 secret_name_taken', async () => {
    const t = await svc.createTenant()
    const dest = await createFolder('dest', null, t)
    for (let round = 0; round < 5; round++) {
      const a = await createFolder(`a${round}`, null, t)
      const b = await createFolder(`b${round}`, null, t)
      const sa = await createSecret(`same${round}`, a.id, t)
      const sb = await createSecret(`same${round}`, b.id, t)
      const results = await Promise.all([
        call('POST', '/secrets/move', { secretIds: [sa], folderId: dest.id }, t),
        call('POST', '/secrets/move', { secretIds: [sb], folderId: dest.id }, t),
      ])
      assert.deepEqual(results.map((r) => r.status).sort(), [200, 409], results.map((r) => r.text).join(' '))
      assert.equal(results.find((r) => r.status === 409)!.body.error, 'secret_name_taken')
      const inDest = await svc.sql`
        SELECT id FROM secrets WHERE folder_id = ${dest.id} AND name = ${`same${round}`}`
      assert.equal(inDest.length, 1)
    }
  })
})

describe('ids in upper case (the id schema accepts A-F)', () => {
  test('secret routes answer for an upper-case id as for the stored one (never 500)', async () => {
    const t = await svc.createTenant()
    const folder = await createFolder('f', null, t)
    const id = await createSecret('s', null, t, { totp: { secret: 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ' } })
    const upper = id.toUpperCase()
    const outcomes: [string, number][] = []
    for (const [method, path, body] of [
      ['GET', `/secrets/${upper}?include=all`, undefined],
      ['PATCH', `/secrets/${upper}`, { folderId: folder.id }],
      ['PATCH', `/secrets/${upper}`, { value: 'second' }],
      ['GET', `/secrets/${upper}/versions`, undefined],
      ['GET', `/secrets/${upper}/versions/1?include=all`, undefined],
      ['GET', `/secrets/${upper}/totp`, undefined],
      ['POST', '/secrets/move', { secretIds: [upper], folderId: null }],
      ['DELETE', `/secrets/${upper}`, undefined],
      ['POST', `/secrets/${upper}/restore`, undefined],
    ] as [string, string, unknown][]) {
      const res = await call(method, path, body, t)
      outcomes.push([`${method} ${path.replace(upper, '{ID}')}`, res.status])
    }
    assert.deepEqual(outcomes, [
      ['GET /secrets/{ID}?include=all', 200],
      ['PATCH /secrets/{ID}', 200],
      ['PATCH /secrets/{ID}', 200],
      ['GET /secrets/{ID}/versions', 200],
      ['GET /secrets/{ID}/versions/1?include=all', 200],
      ['GET /secrets/{ID}/totp', 200],
      ['POST /secrets/move', 200],
      ['DELETE /secrets/{ID}', 200],
      ['POST /secrets/{ID}/restore', 200],
    ])
  })

  test('cycle refusal does not depend on the letter case of the ids (409 folder_cycle, never 404 or 500)', async () => {
    const t = await svc.createTenant()
    const [a, , c] = await createChain(3, 'u', t)
    const outcomes: [string, number, string | undefined][] = []
    for (const [what, pathId, parentId] of [
      ['path id upper case, into a descendant', a!.id.toUpperCase(), c!.id],
      ['body id upper case, into a descendant', a!.id, c!.id.toUpperCase()],
      ['path id upper case, into itself', a!.id.toUpperCase(), a!.id],
      ['body id upper case, into itself', a!.id, a!.id.toUpperCase()],
    ]) {
      const res = await call('PATCH', `/folders/${pathId}`, { parentId }, t)
      outcomes.push([what!, res.status, res.body?.error])
    }
    assert.deepEqual(
      outcomes,
      outcomes.map(([what]) => [what, 409, 'folder_cycle']),
    )
    assert.equal((await folderRow(a!.id))!.parent_id, null)
  })

  test('POST /secrets/move: missing lists only the ids that were not found, whatever their case', async () => {
    const t = await svc.createTenant()
    const id = await createSecret('s', null, t)
    const unknown = randomUUID()
    const res = await call(
      'POST',
      '/secrets/move',
      { secretIds: [id.toUpperCase(), unknown], folderId: null },
      t,
    )
    expectError(res, 404, 'secret_not_found', 'one unknown')
    assert.deepEqual(res.body.missing, [unknown])
  })

  test('audit records name the stored (lower-case) id whatever the case of the request', async () => {
    const t = await svc.createTenant()
    const folder = await createFolder('f', null, t)
    const id = await createSecret('s', null, t)
    assert.equal((await call('PATCH', `/folders/${folder.id.toUpperCase()}`, { name: 'g' }, t)).status, 200)
    assert.equal((await call('DELETE', `/secrets/${id.toUpperCase()}`, undefined, t)).status, 200)
    assert.deepEqual(
      (await auditRecords(t.tenantId, 'folders.update')).map((r) => r.resource),
      [`folder:${folder.id}`],
    )
    assert.deepEqual(
      (await auditRecords(t.tenantId, 'secrets.delete')).map((r) => r.resource),
      [`secret:${id}`],
    )
  })
})

test('the folder list sorts by path segments: a folder, then its subfolders, then its next sibling', async () => {
  const t = await svc.createTenant()
  const a = await createFolder('a', null, t)
  await createFolder('a-x', null, t)
  const b = await createFolder('b', a.id, t)
  await createFolder('c', b.id, t)
  await createFolder('a', a.id, t)
  const res = await call('GET', '/folders', undefined, t)
  assert.equal(res.status, 200, res.text)
  assert.deepEqual(
    res.body.data.map((f: Folder) => f.path),
    ['a', 'a/a', 'a/b', 'a/b/c', 'a-x'],
  )
})
