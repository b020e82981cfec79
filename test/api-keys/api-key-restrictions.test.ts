import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { insertAuditEntries } from '../../src/audit/audit-store.ts'
import { KEY_OPERATIONS } from '../../src/auth/key-restriction.ts'
import { actorOf } from '../../src/auth/request-context.ts'
import { apiClient, b64, uniqueName } from '../helpers/api-client.ts'
import { startTestService, type TenantWithKey, type TestService, waitFor } from '../helpers/service.ts'

/**
 * Narrower API keys (issue 35, item 6; docs/operations.md "API keys"): an API key restricted to
 * keys (ids or aliases) and to cryptographic operations, fixed at creation, shown in its views,
 * carried on its principal and on the actor; a key minted by a restricted key is never wider; and
 * each API key's `lastUsedAt`, folded from the audit records it made (no write per request).
 */

interface ApiKeyBody {
  id: string
  key: string
  parentId: string | null
  keys: string[] | null
  operations: string[] | null
  lastUsedAt: string | null
}

describe('narrower API keys', () => {
  let svc: TestService
  let admin: TenantWithKey
  let other: TenantWithKey
  /** Two Encryption keys of `admin`, and one of `other`. */
  let keyA: string
  let keyB: string
  let foreignKey: string

  before(async () => {
    svc = await startTestService()
    admin = await svc.createTenant()
    other = await svc.createTenant()
    keyA = (await api.createKey('Encryption', 'ML-KEM-768')).id
    keyB = (await api.createKey('Encryption', 'ML-KEM-768')).id
    foreignKey = (await api.createKey('Encryption', 'ML-KEM-768', {}, other)).id
  })
  after(async () => svc?.stop())

  const api = apiClient(() => ({ svc, tenant: admin }))
  const call = api.call

  async function mint(by: TenantWithKey | string, body: Record<string, unknown>): Promise<ApiKeyBody> {
    const res = await call('POST', '/api-keys', { name: uniqueName('restricted'), ...body }, by)
    assert.equal(res.status, 201, res.text)
    return res.body
  }

  const getApiKey = async (id: string, by: TenantWithKey | string = admin) => {
    const res = await call('GET', `/api-keys/${id}`, undefined, by)
    assert.equal(res.status, 200, res.text)
    return res.body as ApiKeyBody
  }

  const listApiKeys = async (by: TenantWithKey = admin) => {
    const res = await call('GET', '/api-keys?limit=500&includeRevoked=true', undefined, by)
    assert.equal(res.status, 200, res.text)
    return res.body.data as ApiKeyBody[]
  }

  // ---- creation and views ------------------------------------------------------------------

  test('a restriction is stored normalised, shown in the create answer, GET and the list, and audited', async () => {
    const created = await mint(admin, {
      scopes: ['encryption:write'],
      // A key id in upper case, an alias that names no key yet, and repeats.
      keys: [keyA.toUpperCase(), 'alias/payments-prod', keyA, 'alias/payments-prod'],
      operations: ['encrypt', 'decrypt', 'encrypt'],
    })
    assert.deepEqual(created.keys, [keyA, 'alias/payments-prod'])
    assert.deepEqual(created.operations, ['encrypt', 'decrypt'])
    assert.equal(created.lastUsedAt, null)

    const got = await getApiKey(created.id)
    assert.deepEqual(got.keys, [keyA, 'alias/payments-prod'])
    assert.deepEqual(got.operations, ['encrypt', 'decrypt'])
    assert.equal(got.lastUsedAt, null)

    const listed = (await listApiKeys()).find((k) => k.id === created.id)
    assert.ok(listed, 'listed')
    assert.deepEqual(listed.keys, [keyA, 'alias/payments-prod'])
    assert.deepEqual(listed.operations, ['encrypt', 'decrypt'])

    const [row] = await svc.sql<{ restricted_keys: string[]; restricted_operations: string[] }[]>`
      SELECT restricted_keys, restricted_operations FROM api_keys WHERE id = ${created.id}`
    assert.deepEqual(row!.restricted_keys, [keyA, 'alias/payments-prod'])
    assert.deepEqual(row!.restricted_operations, ['encrypt', 'decrypt'])

    const audit = await call('GET', `/audit?action=apikeys.create&resource=apikey:${created.id}`)
    assert.equal(audit.status, 200, audit.text)
    assert.equal(audit.body.data.length, 1)
    assert.equal(audit.body.data[0].details.keys, `${keyA} alias/payments-prod`)
    assert.equal(audit.body.data[0].details.operations, 'encrypt decrypt')
  })

  test('without keys or operations a key is unrestricted (null), and either alone restricts only that', async () => {
    const plain = await mint(admin, { scopes: ['encryption:write'] })
    assert.equal(plain.keys, null)
    assert.equal(plain.operations, null)
    const onlyOps = await mint(admin, { scopes: ['encryption:write'], operations: ['sign'] })
    assert.equal(onlyOps.keys, null)
    assert.deepEqual(onlyOps.operations, ['sign'])
    const onlyKeys = await mint(admin, { scopes: ['encryption:write'], keys: [keyB] })
    assert.deepEqual(onlyKeys.keys, [keyB])
    assert.equal(onlyKeys.operations, null)
  })

  test('the restriction is carried on the principal and the actor; a member is never restricted', async () => {
    const created = await mint(admin, { scopes: ['encryption:write'], keys: [keyA], operations: ['encrypt'] })
    const principal = await svc.api.services.authenticator.authenticate(created.key)
    assert.ok(principal)
    assert.deepEqual(principal.keyRestriction, { keys: [keyA], operations: ['encrypt'] })
    const actor = actorOf({ principal, id: 'req-1', ip: '127.0.0.1' })
    assert.deepEqual(actor.keyRestriction, { keys: [keyA], operations: ['encrypt'] })

    const unrestricted = await svc.api.services.authenticator.authenticate(admin.key)
    assert.equal(unrestricted?.keyRestriction, null)

    const member = {
      kind: 'member' as const,
      tenantId: admin.tenantId,
      accountId: randomUUID(),
      role: 'tenant:owner' as const,
      scopes: new Set<never>(),
      grantId: 'grant',
    }
    assert.equal(actorOf({ principal: member, id: 'req-2', ip: '127.0.0.1' }).keyRestriction, null)
  })

  // ---- validation --------------------------------------------------------------------------

  test('malformed lists are 400 naming the field (and the allowed operations)', async () => {
    const attempt = async (body: Record<string, unknown>) => {
      const res = await call('POST', '/api-keys', { name: 'bad', scopes: ['encryption:write'], ...body })
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${res.text}`)
      assert.equal(res.body.error, 'validation_failed')
      return res.body.fields as { path: string; message: string; allowedValues?: string[] }[]
    }
    assert.equal((await attempt({ keys: [] }))[0]!.path, 'body/keys')
    assert.equal((await attempt({ operations: [] }))[0]!.path, 'body/operations')
    const tooMany = Array.from({ length: 101 }, () => randomUUID())
    assert.equal((await attempt({ keys: tooMany }))[0]!.path, 'body/keys')
    for (const entry of [
      'payments-prod',
      'alias/',
      'alias/pay ments',
      `alias/${'a'.repeat(251)}`,
      'key:abc',
    ]) {
      const fields = await attempt({ keys: [keyA, entry] })
      assert.equal(fields[0]!.path, 'body/keys/1', entry)
      assert.match(fields[0]!.message, /key id \(UUID\) or an alias/)
    }
    // The longest alias name is taken (here it names no key: aliases need not exist yet).
    const longest = await mint(admin, { scopes: ['encryption:write'], keys: [`alias/${'a'.repeat(250)}`] })
    assert.deepEqual(longest.keys, [`alias/${'a'.repeat(250)}`])

    const op = await attempt({ operations: ['encrypt', 'delete'] })
    assert.equal(op[0]!.path, 'body/operations/1')
    assert.deepEqual(op[0]!.allowedValues, [...KEY_OPERATIONS])
    assert.equal((await attempt({ keys: 'alias/x' }))[0]!.path, 'body/keys')
  })

  test('a key id that is not a key of the tenant is 400 naming the entry, another tenant’s key too', async () => {
    const unknown = randomUUID()
    const res = await call('POST', '/api-keys', {
      name: 'bad',
      scopes: ['encryption:write'],
      keys: [keyA, unknown, 'alias/not-yet', foreignKey],
    })
    assert.equal(res.status, 400, res.text)
    assert.equal(res.body.error, 'validation_failed')
    assert.deepEqual(
      res.body.fields.map((f: { path: string }) => f.path),
      ['body/keys/1', 'body/keys/3'],
    )
    assert.ok(res.body.message.includes(unknown), res.body.message)
    assert.ok(res.body.message.includes(foreignKey), res.body.message)
    // The same message for both: another tenant's key is not told apart from no key.
    assert.equal(
      res.body.fields[0].message.replace(unknown, 'X'),
      res.body.fields[1].message.replace(foreignKey, 'X'),
    )
    const rows = await svc.sql`SELECT 1 FROM api_keys WHERE ${unknown} = ANY (restricted_keys)`
    assert.equal(rows.length, 0, 'nothing was created')
  })

  // ---- lineage -----------------------------------------------------------------------------

  test('a restricted key mints only keys restricted at least as much: 403 restriction_escalation naming the excess', async () => {
    const parent = await mint(admin, {
      scopes: ['apikeys:write', 'apikeys:read', 'encryption:write'],
      keys: [keyA, 'alias/payments-prod'],
      operations: ['encrypt', 'decrypt'],
    })
    const refused = async (body: Record<string, unknown>) => {
      const res = await call(
        'POST',
        '/api-keys',
        { name: 'wider', scopes: ['encryption:write'], ...body },
        parent.key,
      )
      assert.equal(res.status, 403, `${JSON.stringify(body)}: ${res.text}`)
      assert.equal(res.body.error, 'restriction_escalation')
      assert.deepEqual(res.body.allowedKeys, [keyA, 'alias/payments-prod'])
      assert.deepEqual(res.body.allowedOperations, ['encrypt', 'decrypt'])
      return res.body as { message: string; wider: { field: string; entries: string[] | null }[] }
    }

    // Absent lists would be wider (refused, not inherited silently: as a child's expiry).
    const bare = await refused({})
    assert.deepEqual(bare.wider, [
      { field: 'keys', entries: null },
      { field: 'operations', entries: null },
    ])
    assert.deepEqual((await refused({ keys: [keyA], operations: ['encrypt', 'sign'] })).wider, [
      { field: 'operations', entries: ['sign'] },
    ])
    const widerKeys = await refused({ keys: [keyA, keyB], operations: ['encrypt'] })
    assert.deepEqual(widerKeys.wider, [{ field: 'keys', entries: [keyB] }])
    assert.ok(widerKeys.message.includes(keyB), widerKeys.message)
    assert.deepEqual((await refused({ keys: [keyA] })).wider, [{ field: 'operations', entries: null }])
    // An alias is not the key it names now (it can move), nor the other way round.
    assert.deepEqual((await refused({ keys: ['alias/other'], operations: ['encrypt'] })).wider, [
      { field: 'keys', entries: ['alias/other'] },
    ])
    // Checked before the key ids' existence: a restricted key learns nothing of keys outside its list.
    assert.deepEqual(
      (await refused({ keys: [randomUUID().toUpperCase()], operations: ['encrypt'] })).wider[0]!.field,
      'keys',
    )

    const denied = await call('GET', '/audit?action=authorization.denied&outcome=denied&limit=20')
    const mine = denied.body.data.filter(
      (r: { actor: string; details: { operation?: string } }) =>
        r.actor === `apikey:${parent.id}` && r.details.operation === 'apikeys.create',
    )
    assert.equal(mine.length, 6, 'each refusal is recorded')

    const child = await mint(parent.key, {
      scopes: ['apikeys:write', 'encryption:write'],
      keys: [keyA.toUpperCase()],
      operations: ['encrypt'],
    })
    assert.equal(child.parentId, parent.id)
    assert.deepEqual(child.keys, [keyA])
    assert.deepEqual(child.operations, ['encrypt'])
    const sameAsParent = await mint(parent.key, {
      scopes: ['encryption:write'],
      keys: ['alias/payments-prod', keyA],
      operations: ['decrypt', 'encrypt'],
    })
    assert.deepEqual(sameAsParent.keys, ['alias/payments-prod', keyA])

    // The grandchild is bound by the child, not by the grandparent.
    const grand = await call(
      'POST',
      '/api-keys',
      { name: 'grand', scopes: ['encryption:write'], keys: [keyA], operations: ['decrypt'] },
      child.key,
    )
    assert.equal(grand.status, 403, grand.text)
    assert.deepEqual(grand.body.wider, [{ field: 'operations', entries: ['decrypt'] }])
  })

  test('a restricted key cannot revoke a key restricted less than itself; it can revoke its own children', async () => {
    const parent = await mint(admin, {
      scopes: ['apikeys:write', 'encryption:write'],
      keys: [keyA],
      operations: ['encrypt'],
    })
    const unrestricted = await mint(admin, { scopes: ['encryption:write'] })
    const refused = await call('POST', `/api-keys/${unrestricted.id}/revoke`, undefined, parent.key)
    assert.equal(refused.status, 403, refused.text)
    assert.equal(refused.body.error, 'restriction_escalation')
    const [row] = await svc.sql`SELECT revoked_at FROM api_keys WHERE id = ${unrestricted.id}`
    assert.equal(row!.revoked_at, null, 'not revoked')

    const child = await mint(parent.key, {
      scopes: ['encryption:write'],
      keys: [keyA],
      operations: ['encrypt'],
    })
    const revoked = await call('POST', `/api-keys/${child.id}/revoke`, undefined, parent.key)
    assert.equal(revoked.status, 200, revoked.text)
    assert.ok(revoked.body.revokedAt)
    assert.deepEqual(revoked.body.keys, [keyA])
  })

  test('a burst of parallel creations by a restricted key: exactly the narrow ones are made, none wider', async () => {
    const parent = await mint(admin, {
      scopes: ['apikeys:write', 'encryption:write'],
      keys: [keyA],
      operations: ['encrypt', 'decrypt'],
    })
    const bodies = Array.from({ length: 24 }, (_, i) =>
      i % 3 === 0
        ? { name: `narrow-${i}`, scopes: ['encryption:write'], keys: [keyA], operations: ['encrypt'] }
        : i % 3 === 1
          ? {
              name: `wide-keys-${i}`,
              scopes: ['encryption:write'],
              keys: [keyA, keyB],
              operations: ['encrypt'],
            }
          : { name: `unrestricted-${i}`, scopes: ['encryption:write'] },
    )
    const results = await Promise.all(bodies.map((body) => call('POST', '/api-keys', body, parent.key)))
    for (const [i, res] of results.entries()) {
      if (i % 3 === 0) assert.equal(res.status, 201, `${bodies[i]!.name}: ${res.text}`)
      else {
        assert.equal(res.status, 403, `${bodies[i]!.name}: ${res.text}`)
        assert.equal(res.body.error, 'restriction_escalation')
      }
    }
    const children = await svc.sql<
      { name: string; restricted_keys: string[] | null; restricted_operations: string[] | null }[]
    >`
      SELECT name, restricted_keys, restricted_operations FROM api_keys WHERE parent_id = ${parent.id}`
    assert.equal(children.length, 8)
    for (const child of children) {
      assert.match(child.name, /^narrow-/)
      assert.deepEqual(child.restricted_keys, [keyA])
      assert.deepEqual(child.restricted_operations, ['encrypt'])
    }
  })

  // ---- lastUsedAt ----------------------------------------------------------------------------

  const lastAuditId = async () => {
    const [row] = await svc.sql<{ id: string }[]>`SELECT coalesce(max(id), 0)::text AS id FROM audit_log`
    return BigInt(row!.id)
  }
  const positionOfLastUse = async () => {
    const [row] = await svc.sql<{ position: string }[]>`
      SELECT position::text FROM audit_feed_cursors WHERE consumer = 'apikeys.last_use'`
    return BigInt(row?.position ?? '0')
  }
  /** Runs the last-use fold until it has folded every record written so far. */
  const foldLastUse = async () => {
    const last = await lastAuditId()
    await waitFor(
      async () => {
        await svc.api.services.apiKeys.foldLastUse()
        return (await positionOfLastUse()) >= last
      },
      'the API-key last-use fold',
      60_000,
    )
  }
  const storedLastUse = async (id: string) => {
    const [row] = await svc.sql<
      { last_used_at: Date | null }[]
    >`SELECT last_used_at FROM api_keys WHERE id = ${id}`
    return row!.last_used_at
  }
  /** The time of the latest audit record the API key made, as GET /audit shows it. */
  const latestRecordBy = async (tenant: TenantWithKey, apiKeyId: string, action: string) => {
    const res = await call('GET', `/audit?action=${action}&limit=500`, undefined, tenant)
    assert.equal(res.status, 200, res.text)
    const mine = (res.body.data as { actor: string; occurredAt: string }[]).filter(
      (r) => r.actor === `apikey:${apiKeyId}`,
    )
    assert.ok(mine.length > 0, `a ${action} record by the key`)
    return mine
      .map((r) => r.occurredAt)
      .sort()
      .at(-1)!
  }

  test('lastUsedAt: the latest audited request made with the key, before and after the fold, with no write per request', async () => {
    const user = await mint(admin, { scopes: ['encryption:write'], keys: [keyA] })
    assert.equal((await getApiKey(user.id)).lastUsedAt, null)

    const before = Date.now()
    const first = await call('POST', '/encrypt', { keyId: keyA, plaintext: b64('first') }, user.key)
    assert.equal(first.status, 200, first.text)
    const afterFirst = Date.now()
    const firstAt = await latestRecordBy(admin, user.id, 'crypto.encrypt')
    assert.ok(Date.parse(firstAt) >= before - 1 && Date.parse(firstAt) <= afterFirst + 1, firstAt)

    // Read before any fold: the records not folded yet, and nothing written to the key's row.
    assert.equal((await getApiKey(user.id)).lastUsedAt, firstAt)
    assert.equal((await listApiKeys()).find((k) => k.id === user.id)?.lastUsedAt, firstAt)
    assert.equal(await storedLastUse(user.id), null, 'no write per request')

    await foldLastUse()
    assert.equal((await storedLastUse(user.id))?.toISOString(), firstAt)
    assert.equal((await getApiKey(user.id)).lastUsedAt, firstAt)

    // A later use shows at once (read-time), over the folded value; a fold then stores it.
    await new Promise((resolve) => setTimeout(resolve, 5))
    const second = await call('POST', '/encrypt', { keyId: keyA, plaintext: b64('second') }, user.key)
    assert.equal(second.status, 200, second.text)
    const secondAt = await latestRecordBy(admin, user.id, 'crypto.encrypt')
    assert.ok(secondAt > firstAt, `${secondAt} after ${firstAt}`)
    assert.equal((await getApiKey(user.id)).lastUsedAt, secondAt)
    assert.equal((await storedLastUse(user.id))?.toISOString(), firstAt)
    await foldLastUse()
    assert.equal((await storedLastUse(user.id))?.toISOString(), secondAt)

    // A refusal the audit records (a scope the key lacks) is a use too.
    await new Promise((resolve) => setTimeout(resolve, 5))
    const refused = await call(
      'POST',
      '/keys',
      { name: 'x', keyType: 'Signing', algorithm: 'Ed25519' },
      user.key,
    )
    assert.equal(refused.status, 403, refused.text)
    const refusedAt = await latestRecordBy(admin, user.id, 'authorization.denied')
    assert.equal((await getApiKey(user.id)).lastUsedAt, refusedAt)

    // Folding the same records again changes nothing, and a fold never moves a time back.
    await foldLastUse()
    await svc.sql`UPDATE audit_feed_cursors SET position = 0 WHERE consumer = 'apikeys.last_use'`
    await svc.sql`UPDATE api_keys SET last_used_at = ${new Date(Date.parse(refusedAt) + 60_000)} WHERE id = ${user.id}`
    await foldLastUse()
    assert.equal(
      (await storedLastUse(user.id))?.toISOString(),
      new Date(Date.parse(refusedAt) + 60_000).toISOString(),
    )
    await svc.sql`UPDATE api_keys SET last_used_at = ${new Date(refusedAt)} WHERE id = ${user.id}`
    assert.equal((await getApiKey(user.id)).lastUsedAt, refusedAt)
  })

  test('lastUsedAt never shows another tenant’s keys or records, even a record naming a foreign key as actor', async () => {
    const theirs = await mint(other, { scopes: ['encryption:write'] })
    const used = await call('POST', '/encrypt', { keyId: foreignKey, plaintext: b64('x') }, theirs.key)
    assert.equal(used.status, 200, used.text)
    const theirAt = await latestRecordBy(other, theirs.id, 'crypto.encrypt')

    // A record in admin's tenant whose actor names other's API key (no request makes one; it
    // stands for any record mislabelled), a minute later than the real use.
    const forgedAt = new Date(Date.parse(theirAt) + 60_000)
    await insertAuditEntries(svc.sql, [
      {
        tenantId: admin.tenantId,
        actor: `apikey:${theirs.id}`,
        action: 'crypto.encrypt',
        resource: `key:${keyA}`,
        outcome: 'success',
        occurredAt: forgedAt,
      },
    ])

    // Read-time: each tenant sees its own keys with its own records.
    assert.ok(!(await listApiKeys(admin)).some((k) => k.id === theirs.id), 'not in the other tenant’s list')
    const foreignGet = await call('GET', `/api-keys/${theirs.id}`, undefined, admin)
    assert.equal(foreignGet.status, 404, foreignGet.text)
    assert.equal((await getApiKey(theirs.id, other)).lastUsedAt, theirAt)

    await foldLastUse()
    assert.equal((await storedLastUse(theirs.id))?.toISOString(), theirAt, 'the fold matches the tenant too')
    assert.equal((await getApiKey(theirs.id, other)).lastUsedAt, theirAt)
    assert.ok(!(await listApiKeys(admin)).some((k) => k.id === theirs.id))
    for (const view of await listApiKeys(admin))
      assert.notEqual(view.lastUsedAt, forgedAt.toISOString(), `${view.id} shows no foreign record`)
  })

  // ---- enforcement (the key resolver: the aliases helper's part) -----------------------------

  test('a restricted key: 403 key_not_allowed on /encrypt with another key, 403 operation_not_allowed on /decrypt', async () => {
    const restricted = await mint(admin, {
      scopes: ['encryption:write'],
      keys: [keyA],
      operations: ['encrypt'],
    })
    const allowed = await call('POST', '/encrypt', { keyId: keyA, plaintext: b64('allowed') }, restricted.key)
    assert.equal(allowed.status, 200, allowed.text)
    assert.equal(allowed.body.keyId, keyA)
    // The unrestricted admin key opens what the restricted key sealed.
    const opened = await call('POST', '/decrypt', {
      keyId: keyA,
      ciphertext: allowed.body.ciphertext,
      encapsulatedKey: allowed.body.encapsulatedKey,
      nonce: allowed.body.nonce,
      tag: allowed.body.tag,
    })
    assert.equal(opened.status, 200, opened.text)
    assert.equal(Buffer.from(opened.body.plaintext, 'base64').toString(), 'allowed')

    const otherKey = await call('POST', '/encrypt', { keyId: keyB, plaintext: b64('x') }, restricted.key)
    assert.equal(otherKey.status, 403, otherKey.text)
    assert.equal(otherKey.body.error, 'key_not_allowed')

    const decrypt = await call(
      'POST',
      '/decrypt',
      {
        keyId: keyA,
        ciphertext: allowed.body.ciphertext,
        encapsulatedKey: allowed.body.encapsulatedKey,
        nonce: allowed.body.nonce,
        tag: allowed.body.tag,
      },
      restricted.key,
    )
    assert.equal(decrypt.status, 403, decrypt.text)
    assert.equal(decrypt.body.error, 'operation_not_allowed')
  })
})
