import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { createReadThroughCache } from '../../src/data/read-through-cache.ts'
import { b64, unb64, uniqueName } from '../helpers/api-client.ts'
import {
  type HttpResult,
  httpRequest,
  type SpawnedService,
  spawnService,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'

/**
 * The per-process key-row cache (src/keys/key-cache.ts on src/data/read-through-cache.ts)
 * over real HTTP, PostgreSQL and Redis, plus the read-through cache itself as a unit.
 *
 * Three API processes of one deployment share the database, Redis prefix and master key:
 * A (in this process) and B (a separate OS process) cache key rows for 600 s, so only the
 * invalidation bus can explain B following a change made through A within the 1.5 s it is
 * polled for; C (a separate OS process) runs with KMS_KEY_CACHE_TTL_MS=0, caching off. N (in this
 * process, its own database) caches for 600 s and has no Redis at all.
 * Every test has its own tenant, so no test sees another one's invalidations.
 */

const LONG_TTL_MS = '600000'
/** How long another process is polled for a change: far below the 600 s TTL. */
const BUS_DEADLINE_MS = 1500
const PLAINTEXT = 'key cache test'
/** Nothing listens on port 1: connections are refused at once. */
const UNREACHABLE_REDIS = 'redis://127.0.0.1:1'

interface Target {
  baseUrl: string
}

let a: TestService
let b: SpawnedService
let c: SpawnedService
let n: TestService

const call = (target: Target, tenant: TenantWithKey, method: string, path: string, body?: unknown) =>
  httpRequest(target.baseUrl, method, `/api/v1${path}`, {
    key: tenant.key,
    ...(body !== undefined ? { body } : {}),
  })

/** Encrypts with `keyId`, or with the tenant default Encryption key when it is absent. */
const encrypt = (target: Target, tenant: TenantWithKey, keyId?: string) =>
  call(target, tenant, 'POST', '/encrypt', { ...(keyId ? { keyId } : {}), plaintext: b64(PLAINTEXT) })

/** Creates an ML-KEM-768 Encryption key (through process A unless told otherwise). */
async function createKey(
  tenant: TenantWithKey,
  extra: Record<string, unknown> = {},
  through: Target = a,
): Promise<string> {
  const res = await call(through, tenant, 'POST', '/keys', {
    name: uniqueName('kem'),
    keyType: 'Encryption',
    algorithm: 'ML-KEM-768',
    ...extra,
  })
  assert.equal(res.status, 201, res.text)
  return res.body.id as string
}

/** An answer in a few words for assertion messages (an envelope is kilobytes of Base64). */
const summary = (res: HttpResult) =>
  res.status === 200
    ? `200 keyId ${res.body.keyId} keyVersion ${res.body.keyVersion}`
    : `${res.status} ${res.body?.error ?? res.text.slice(0, 200)} ${res.body?.state ?? ''}`

function assertEncrypted(res: HttpResult, keyId: string, version: number, what: string): void {
  assert.equal(res.status, 200, `${what}: ${summary(res)}`)
  assert.equal(res.body.keyId, keyId, what)
  assert.equal(res.body.keyVersion, version, what)
}

function assertRefused(res: HttpResult, state: string, what: string): void {
  assert.equal(res.status, 409, `${what}: ${summary(res)}`)
  assert.equal(res.body.error, 'key_state_conflict', what)
  assert.equal(res.body.state, state, what)
}

/** The four envelope fields of an encrypt answer: a decrypt request. */
const envelopeOf = (res: HttpResult) => ({
  ciphertext: res.body.ciphertext,
  encapsulatedKey: res.body.encapsulatedKey,
  nonce: res.body.nonce,
  tag: res.body.tag,
})

/**
 * Encrypts on `target` until `done` holds of the answer, for at most BUS_DEADLINE_MS after
 * `since` (when the change was acknowledged). Returns the last answer; the caller asserts it.
 */
async function pollEncrypt(
  target: Target,
  tenant: TenantWithKey,
  keyId: string | undefined,
  since: number,
  done: (res: HttpResult) => boolean,
): Promise<HttpResult> {
  let res = await encrypt(target, tenant, keyId)
  while (!done(res) && Date.now() - since < BUS_DEADLINE_MS) {
    await sleep(20)
    res = await encrypt(target, tenant, keyId)
  }
  return res
}

before(async () => {
  // N gives up waiting for its Redis after 2 s and serves without it: started meanwhile.
  const starting = startTestService({ KMS_KEY_CACHE_TTL_MS: LONG_TTL_MS, REDIS_URL: UNREACHABLE_REDIS })
  // Awaited below; this only keeps a failure while A starts from counting as unhandled.
  starting.catch(() => {})
  a = await startTestService({ KMS_KEY_CACHE_TTL_MS: LONG_TTL_MS })
  ;[b, c, n] = await Promise.all([
    spawnService({ ...a.env, KMS_KEY_CACHE_TTL_MS: LONG_TTL_MS }),
    spawnService({ ...a.env, KMS_KEY_CACHE_TTL_MS: '0' }),
    starting,
  ])
})
after(async () => {
  await Promise.all([b?.stop(), c?.stop(), n?.stop()])
  await a?.stop()
})

describe('key cache across processes (invalidation bus, 600 s TTL)', () => {
  test('a key revoked through process A is refused for encrypt by process B', async () => {
    const tenant = await a.createTenant()
    const keyId = await createKey(tenant)
    // B reads and caches the row; the second call is served from its cache.
    assertEncrypted(await encrypt(b, tenant, keyId), keyId, 1, 'B before revocation')
    const envelope = await encrypt(b, tenant, keyId)
    assertEncrypted(envelope, keyId, 1, 'B before revocation, cached')

    const revoked = await call(a, tenant, 'POST', `/keys/${keyId}/revoke`)
    assert.equal(revoked.status, 200, revoked.text)
    assert.equal(revoked.body.state, 'Revoked')
    const since = Date.now()

    const res = await pollEncrypt(b, tenant, keyId, since, (r) => r.status !== 200)
    assertRefused(res, 'Revoked', `B ${Date.now() - since} ms after the revocation`)
    // A revoked key still decrypts (spec section 3): B refuses encrypt only.
    const opened = await call(b, tenant, 'POST', '/decrypt', envelopeOf(envelope))
    assert.equal(opened.status, 200, opened.text)
    assert.equal(unb64(opened.body.plaintext).toString(), PLAINTEXT)
  })

  test('a rotation through process A is used by process B for the next encryptions', async () => {
    const tenant = await a.createTenant()
    const keyId = await createKey(tenant)
    assertEncrypted(await encrypt(b, tenant, keyId), keyId, 1, 'B before rotation')
    assertEncrypted(await encrypt(b, tenant, keyId), keyId, 1, 'B before rotation, cached')

    const rotated = await call(a, tenant, 'POST', `/keys/${keyId}/rotate`)
    assert.equal(rotated.status, 200, rotated.text)
    assert.equal(rotated.body.version, 2)
    const since = Date.now()

    const res = await pollEncrypt(b, tenant, keyId, since, (r) => r.status !== 200 || r.body.keyVersion !== 1)
    assertEncrypted(res, keyId, 2, `B ${Date.now() - since} ms after the rotation`)
    // The envelope B made with version 2 opens on A: B used the new material, not just the number.
    const opened = await call(a, tenant, 'POST', '/decrypt', envelopeOf(res))
    assert.equal(opened.status, 200, opened.text)
    assert.equal(opened.body.keyVersion, 2)
    assert.equal(unb64(opened.body.plaintext).toString(), PLAINTEXT)
  })

  test('default key changes through process A are followed by process B for encrypt without keyId', async () => {
    const tenant = await a.createTenant()
    // No default yet: B caches that there is none.
    const none = await encrypt(b, tenant)
    assert.equal(none.status, 409, none.text)
    assert.equal(none.body.error, 'no_default_key')

    const first = await createKey(tenant, { isDefault: true })
    let since = Date.now()
    let res = await pollEncrypt(b, tenant, undefined, since, (r) => r.status === 200)
    assertEncrypted(res, first, 1, `B ${Date.now() - since} ms after a default key was created`)

    // A second key, not the default: B keeps using the first (and caches it again).
    const second = await createKey(tenant)
    assertEncrypted(await encrypt(b, tenant), first, 1, 'B after a non-default key was created')
    assertEncrypted(await encrypt(b, tenant), first, 1, 'B after a non-default key was created, cached')

    const patched = await call(a, tenant, 'PATCH', `/keys/${second}`, { isDefault: true })
    assert.equal(patched.status, 200, patched.text)
    assert.equal(patched.body.isDefault, true)
    since = Date.now()
    res = await pollEncrypt(b, tenant, undefined, since, (r) => r.status !== 200 || r.body.keyId !== first)
    assertEncrypted(res, second, 1, `B ${Date.now() - since} ms after the default moved`)

    // Clearing the default: B answers no_default_key again.
    const cleared = await call(a, tenant, 'PATCH', `/keys/${second}`, { isDefault: false })
    assert.equal(cleared.status, 200, cleared.text)
    since = Date.now()
    res = await pollEncrypt(b, tenant, undefined, since, (r) => r.status !== 200)
    assert.equal(res.status, 409, `B ${Date.now() - since} ms after the default was cleared: ${summary(res)}`)
    assert.equal(res.body.error, 'no_default_key')
  })
})

/**
 * Within one process the service drops the tenant's entries itself before it answers, so the
 * next request there never sees the old row. Run on A, and on N, whose Redis is unreachable:
 * N receives no bus message at all, not even its own, so only the local drop can explain it.
 */
for (const [name, service] of [
  ['process A', () => a],
  ['a process without Redis', () => n],
] as const) {
  describe(`key cache within one process (${name}, 600 s TTL)`, () => {
    test('revoke then encrypt on the same process is refused at once', async () => {
      const svc = service()
      const tenant = await svc.createTenant()
      const keyId = await createKey(tenant, {}, svc)
      assertEncrypted(await encrypt(svc, tenant, keyId), keyId, 1, 'before revocation')
      assertEncrypted(await encrypt(svc, tenant, keyId), keyId, 1, 'before revocation, cached')
      assert.equal((await call(svc, tenant, 'POST', `/keys/${keyId}/revoke`)).status, 200)
      assertRefused(await encrypt(svc, tenant, keyId), 'Revoked', 'right after the revocation')
    })

    test('schedule deletion refuses encrypt at once, cancel deletion allows it again at once', async () => {
      const svc = service()
      const tenant = await svc.createTenant()
      const keyId = await createKey(tenant, {}, svc)
      assertEncrypted(await encrypt(svc, tenant, keyId), keyId, 1, 'before the deletion was scheduled')
      assertEncrypted(await encrypt(svc, tenant, keyId), keyId, 1, 'before, cached')

      const scheduled = await call(svc, tenant, 'DELETE', `/keys/${keyId}?pendingWindowDays=7`)
      assert.equal(scheduled.status, 200, scheduled.text)
      assert.equal(scheduled.body.state, 'Pending Deletion')
      assertRefused(await encrypt(svc, tenant, keyId), 'Pending Deletion', 'right after scheduling deletion')
      assertRefused(await encrypt(svc, tenant, keyId), 'Pending Deletion', 'again, from the cache')

      const cancelled = await call(svc, tenant, 'POST', `/keys/${keyId}/cancel-deletion`)
      assert.equal(cancelled.status, 200, cancelled.text)
      assert.equal(cancelled.body.state, 'Active')
      assertEncrypted(await encrypt(svc, tenant, keyId), keyId, 1, 'right after cancelling deletion')
    })

    test('rotate and a default change are used at once by the same process', async () => {
      const svc = service()
      const tenant = await svc.createTenant()
      const first = await createKey(tenant, { isDefault: true }, svc)
      const second = await createKey(tenant, {}, svc)
      assertEncrypted(await encrypt(svc, tenant), first, 1, 'default before the change')
      assertEncrypted(await encrypt(svc, tenant, second), second, 1, 'second key before rotation')

      assert.equal((await call(svc, tenant, 'POST', `/keys/${second}/rotate`)).status, 200)
      assertEncrypted(await encrypt(svc, tenant, second), second, 2, 'right after rotation')

      const patched = await call(svc, tenant, 'PATCH', `/keys/${second}`, { isDefault: true })
      assert.equal(patched.status, 200, patched.text)
      assertEncrypted(await encrypt(svc, tenant), second, 2, 'default right after the change')
    })
  })
}

describe('key cache TTL', () => {
  test('with KMS_KEY_CACHE_TTL_MS=0 a direct database change is seen by the next encrypt', async () => {
    const tenant = await a.createTenant()
    const keyId = await createKey(tenant)
    assertEncrypted(await encrypt(c, tenant, keyId), keyId, 1, 'C before the update')
    assertEncrypted(await encrypt(c, tenant, keyId), keyId, 1, 'C before the update, again')
    // Bypasses the service: nothing is invalidated.
    await a.sql`UPDATE keys SET revoked_at = now(), updated_at = now() WHERE id = ${keyId}`
    assertRefused(await encrypt(c, tenant, keyId), 'Revoked', 'C right after the direct update')
  })

  test('with a long TTL a direct database change is not seen until the tenant is invalidated', async () => {
    // On N: with no Redis, nothing but this test can drop its cache (on A, the echo of A's own
    // invalidation message could arrive after the row was cached and make this test racy).
    const tenant = await n.createTenant()
    const keyId = await createKey(tenant, {}, n)
    assertEncrypted(await encrypt(n, tenant, keyId), keyId, 1, 'N before the update')
    await n.sql`UPDATE keys SET revoked_at = now(), updated_at = now() WHERE id = ${keyId}`

    // N serves the row it cached: the cache really caches (this is the staleness the bus and
    // the service's own invalidations exist to remove)...
    assertEncrypted(await encrypt(n, tenant, keyId), keyId, 1, 'N from its cache after the direct update')
    // ...while key management, which reads the database, already sees the revocation.
    const read = await call(n, tenant, 'GET', `/keys/${keyId}`)
    assert.equal(read.status, 200, read.text)
    assert.equal(read.body.state, 'Revoked')

    // Any committed change through the service invalidates the tenant, and N reloads the row.
    const touched = await call(n, tenant, 'PATCH', `/keys/${keyId}`, { isFavorite: true })
    assert.equal(touched.status, 200, touched.text)
    assert.equal(touched.body.state, 'Revoked')
    assertRefused(await encrypt(n, tenant, keyId), 'Revoked', 'N after the tenant was invalidated')
  })
})

describe('createReadThroughCache', () => {
  /** A loader whose calls are counted and whose results the test releases one by one. */
  function controlledLoader<V>() {
    const pending: PromiseWithResolvers<V>[] = []
    return {
      calls: () => pending.length,
      load: () => {
        const next = Promise.withResolvers<V>()
        pending.push(next)
        return next.promise
      },
      resolve: (call: number, value: V) => pending[call]!.resolve(value),
      reject: (call: number, error: Error) => pending[call]!.reject(error),
    }
  }

  const counting = <V>(value: () => V) => {
    let calls = 0
    return {
      calls: () => calls,
      load: async () => {
        calls++
        return value()
      },
    }
  }

  test('concurrent misses share one load, and the value is then served from the cache', async () => {
    const cache = createReadThroughCache<string>({ ttlMs: 60_000, maxEntries: 10 })
    const loader = controlledLoader<string>()
    const first = cache.get('g', 'k', loader.load)
    const second = cache.get('g', 'k', loader.load)
    const third = cache.get('g', 'k', loader.load)
    assert.equal(loader.calls(), 1)
    loader.resolve(0, 'v1')
    assert.deepEqual(await Promise.all([first, second, third]), ['v1', 'v1', 'v1'])
    assert.equal(await cache.get('g', 'k', loader.load), 'v1')
    assert.equal(loader.calls(), 1)
    // Another key of the same group is a separate load.
    const other = cache.get('g', 'other', loader.load)
    assert.equal(loader.calls(), 2)
    loader.resolve(1, 'o1')
    assert.equal(await other, 'o1')
  })

  test('undefined is a cached value like any other', async () => {
    const cache = createReadThroughCache<string | undefined>({ ttlMs: 60_000, maxEntries: 10 })
    const loader = counting<string | undefined>(() => undefined)
    assert.equal(await cache.get('g', 'k', loader.load), undefined)
    assert.equal(await cache.get('g', 'k', loader.load), undefined)
    assert.equal(loader.calls(), 1)
  })

  test('a failed load is shared by its waiters, not cached, and the next get loads again', async () => {
    const cache = createReadThroughCache<string>({ ttlMs: 60_000, maxEntries: 10 })
    const loader = controlledLoader<string>()
    const first = cache.get('g', 'k', loader.load)
    const second = cache.get('g', 'k', loader.load)
    assert.equal(loader.calls(), 1)
    loader.reject(0, new Error('database down'))
    await assert.rejects(first, /database down/)
    await assert.rejects(second, /database down/)
    const retry = cache.get('g', 'k', loader.load)
    assert.equal(loader.calls(), 2)
    loader.resolve(1, 'v')
    assert.equal(await retry, 'v')
  })

  test('a dropGroup during a load keeps that load from storing its value', async () => {
    const cache = createReadThroughCache<string>({ ttlMs: 60_000, maxEntries: 10 })
    const loader = controlledLoader<string>()
    const inFlight = cache.get('g', 'k', loader.load)
    cache.dropGroup('g')
    loader.resolve(0, 'stale')
    // The caller that started the load gets what it read; the cache does not keep it.
    assert.equal(await inFlight, 'stale')
    const next = cache.get('g', 'k', loader.load)
    assert.equal(loader.calls(), 2)
    loader.resolve(1, 'fresh')
    assert.equal(await next, 'fresh')
    assert.equal(await cache.get('g', 'k', loader.load), 'fresh')
    assert.equal(loader.calls(), 2)
  })

  test('a get after dropGroup does not join the load already in flight, which cannot overwrite it', async () => {
    const cache = createReadThroughCache<string>({ ttlMs: 60_000, maxEntries: 10 })
    const loader = controlledLoader<string>()
    const old = cache.get('g', 'k', loader.load)
    cache.dropGroup('g')
    const fresh = cache.get('g', 'k', loader.load)
    assert.equal(loader.calls(), 2, 'the get after the drop started its own load')
    loader.resolve(1, 'fresh')
    assert.equal(await fresh, 'fresh')
    // The old load finishes last: it must not replace the fresh value.
    loader.resolve(0, 'stale')
    assert.equal(await old, 'stale')
    assert.equal(await cache.get('g', 'k', loader.load), 'fresh')
    assert.equal(loader.calls(), 2)
  })

  test('dropGroup drops only its group; clear drops everything', async () => {
    const cache = createReadThroughCache<string>({ ttlMs: 60_000, maxEntries: 10 })
    const g1 = counting(() => 'one')
    const g2 = counting(() => 'two')
    await cache.get('g1', 'k', g1.load)
    await cache.get('g2', 'k', g2.load)
    cache.dropGroup('g1')
    await cache.get('g1', 'k', g1.load)
    await cache.get('g2', 'k', g2.load)
    assert.deepEqual([g1.calls(), g2.calls()], [2, 1])
    cache.clear()
    await cache.get('g1', 'k', g1.load)
    await cache.get('g2', 'k', g2.load)
    assert.deepEqual([g1.calls(), g2.calls()], [3, 2])
  })

  test('entries expire after ttlMs of the injected clock', async () => {
    let now = 1_000_000
    const cache = createReadThroughCache<number>({ ttlMs: 1000, maxEntries: 10, now: () => now })
    const loader = counting(() => now)
    assert.equal(await cache.get('g', 'k', loader.load), 1_000_000)
    now += 999
    assert.equal(await cache.get('g', 'k', loader.load), 1_000_000, 'still fresh 1 ms before the TTL')
    assert.equal(loader.calls(), 1)
    now += 1
    assert.equal(await cache.get('g', 'k', loader.load), 1_001_000, 'reloaded at the TTL')
    assert.equal(loader.calls(), 2)
    now += 500
    assert.equal(await cache.get('g', 'k', loader.load), 1_001_000, 'the reloaded value is fresh again')
    assert.equal(loader.calls(), 2)
  })

  test('ttlMs 0 turns caching off', async () => {
    const cache = createReadThroughCache<string>({ ttlMs: 0, maxEntries: 10 })
    const loader = counting(() => 'v')
    for (let i = 0; i < 3; i++) assert.equal(await cache.get('g', 'k', loader.load), 'v')
    assert.equal(loader.calls(), 3)
  })

  test('past maxEntries the oldest group is evicted whole', async () => {
    const cache = createReadThroughCache<string>({ ttlMs: 60_000, maxEntries: 3 })
    const calls = new Map<string, number>()
    const get = (group: string, key: string) =>
      cache.get(group, key, async () => {
        calls.set(`${group}/${key}`, (calls.get(`${group}/${key}`) ?? 0) + 1)
        return `${group}/${key}`
      })
    await get('old', 'a')
    await get('old', 'b')
    await get('mid', 'c')
    // Three entries: the fourth evicts the oldest group, both of its entries.
    await get('new', 'd')
    await get('mid', 'c')
    await get('new', 'd')
    assert.deepEqual(Object.fromEntries(calls), { 'old/a': 1, 'old/b': 1, 'mid/c': 1, 'new/d': 1 })
    await get('old', 'a')
    await get('old', 'b')
    assert.deepEqual(Object.fromEntries(calls), { 'old/a': 2, 'old/b': 2, 'mid/c': 1, 'new/d': 1 })
    // Storing old/b filled the cache again and evicted the oldest group then, mid.
    await get('mid', 'c')
    assert.equal(calls.get('mid/c'), 2)
  })
})
