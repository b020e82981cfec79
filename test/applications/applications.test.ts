import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type AuditView, startTestService, type TestService } from '../helpers/service.ts'
import { consoleClient, memberSession } from '../helpers/sign-in.ts'

const REDIRECT = 'http://127.0.0.1:9/callback'

describe('applications (OpenID clients of a tenant)', () => {
  let service: TestService
  before(async () => {
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: REDIRECT })
  })
  after(() => service.stop())

  const spa = {
    name: 'Dashboard',
    applicationType: 'spa',
    redirectUris: ['https://app.example.com/callback'],
    resources: ['https://api.example.com', 'https://billing.example.com'],
  }

  test('create, read, list: public types have no secret; confidential types get one, once', async () => {
    const tenant = await service.createTenant()
    const created = await service.request('POST', '/api/v1/applications', { key: tenant.key, body: spa })
    assert.equal(created.status, 201, created.text)
    assert.equal(created.body.applicationType, 'spa')
    assert.equal(created.body.hasClientSecret, false)
    assert.equal(created.body.clientSecret, undefined)
    assert.match(created.body.clientId, /^app_[A-Za-z0-9_-]{20}$/)
    assert.deepEqual(created.body.resources, spa.resources)

    const web = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Portal',
        applicationType: 'traditional',
        redirectUris: ['https://portal.example.com/cb'],
      },
    })
    assert.equal(web.status, 201, web.text)
    assert.match(web.body.clientSecret, /^cs_[A-Za-z0-9_-]{43}$/)
    assert.equal(web.body.hasClientSecret, true)
    const read = await service.request('GET', `/api/v1/applications/${web.body.id}`, { key: tenant.key })
    assert.equal(read.status, 200)
    assert.equal(read.body.clientSecret, undefined, 'the secret is never read back')
    assert.ok(!read.text.includes(web.body.clientSecret))

    const list = await service.request('GET', '/api/v1/applications', { key: tenant.key })
    assert.equal(list.body.total, 2)
    assert.deepEqual(
      list.body.data.map((a: { name: string }) => a.name),
      ['Dashboard', 'Portal'],
    )
    assert.ok(!list.text.includes(web.body.clientSecret))

    const audit = await service.request('GET', '/api/v1/audit?action=applications.create', {
      key: tenant.key,
    })
    assert.equal(audit.body.data.length, 2)
    assert.ok(!audit.text.includes(web.body.clientSecret), 'no secret in the audit log')
  })

  test('PUT: omitting resources keeps them, an empty array clears them, a list replaces them', async () => {
    const tenant = await service.createTenant()
    const created = await service.request('POST', '/api/v1/applications', { key: tenant.key, body: spa })
    const path = `/api/v1/applications/${created.body.id}`
    const kept = await service.request('PUT', path, {
      key: tenant.key,
      body: { name: 'Renamed', redirectUris: spa.redirectUris },
    })
    assert.equal(kept.status, 200, kept.text)
    assert.equal(kept.body.name, 'Renamed')
    assert.deepEqual(kept.body.resources, spa.resources)
    const replaced = await service.request('PUT', path, {
      key: tenant.key,
      body: { name: 'Renamed', redirectUris: spa.redirectUris, resources: ['https://other.example.com'] },
    })
    assert.deepEqual(replaced.body.resources, ['https://other.example.com'])
    const cleared = await service.request('PUT', path, {
      key: tenant.key,
      body: { name: 'Renamed', redirectUris: spa.redirectUris, resources: [] },
    })
    assert.deepEqual(cleared.body.resources, [])
    assert.deepEqual((await service.request('GET', path, { key: tenant.key })).body.resources, [])
    const audit = (
      await service.request('GET', '/api/v1/audit?action=applications.update', { key: tenant.key })
    ).body.data as AuditView[]
    assert.deepEqual(audit.map((r) => r.details?.['resources']).sort(), ['cleared', 'kept', 'replaced'])
    // The type cannot change through PUT: a 409 naming it (a read-only field, not an unknown one).
    const typed = await service.request('PUT', path, {
      key: tenant.key,
      body: { name: 'x', redirectUris: spa.redirectUris, applicationType: 'native' },
    })
    assert.equal(typed.status, 409, typed.text)
    assert.equal(typed.body.error, 'read_only_field')
    assert.deepEqual(
      typed.body.fields.map((f: { path: string }) => f.path),
      ['body/applicationType'],
    )
  })

  test('PUT of a GET answer, unchanged, succeeds; a changed read-only field is a 409 naming each one', async () => {
    const tenant = await service.createTenant()
    const m2m = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Batch job',
        applicationType: 'machine_to_machine',
        resources: ['https://api.example.com'],
      },
    })
    assert.equal(m2m.status, 201, m2m.text)
    const web = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        ...spa,
        mfaMethods: {
          totp: { enabled: true, required: true },
          emailOtp: { enabled: false, required: false },
          smsOtp: { enabled: false, required: false },
        },
        branding: { loginPanel: { translations: { en: { title: 'Dashboard', text: 'Sign in.' } } } },
        signUpEnabled: true,
      },
    })
    assert.equal(web.status, 201, web.text)
    for (const id of [m2m.body.id, web.body.id]) {
      const path = `/api/v1/applications/${id}`
      const read = await service.request('GET', path, { key: tenant.key })
      const put = await service.request('PUT', path, { key: tenant.key, body: read.body })
      assert.equal(put.status, 200, put.text)
      const { updatedAt: _before, ...was } = read.body
      const { updatedAt: _after, ...is } = put.body
      assert.deepEqual(is, was, 'nothing changed')
    }

    const path = `/api/v1/applications/${web.body.id}`
    const read = (await service.request('GET', path, { key: tenant.key })).body
    const attempt = (change: Record<string, unknown>) =>
      service.request('PUT', path, { key: tenant.key, body: { ...read, ...change } })
    // A timestamp written another way, for the same instant, is the same value.
    const sameInstant = await attempt({ createdAt: read.createdAt.replace('Z', '+00:00') })
    assert.equal(sameInstant.status, 200, sameInstant.text)
    const fresh = sameInstant.body

    for (const [change, fields] of [
      [{ applicationType: 'traditional' }, ['body/applicationType']],
      [{ clientId: 'app_AAAAAAAAAAAAAAAAAAAA' }, ['body/clientId']],
      [{ id: m2m.body.id }, ['body/id']],
      [
        { hasClientSecret: true, clientSecretRotatedAt: fresh.createdAt },
        ['body/hasClientSecret', 'body/clientSecretRotatedAt'],
      ],
      // What an answer read before a later change carries: another updatedAt than the stored one.
      [{ updatedAt: '2000-01-01T00:00:00.000Z' }, ['body/updatedAt']],
    ] as const) {
      const refused = await service.request('PUT', path, {
        key: tenant.key,
        body: { ...fresh, name: 'Changed', ...change },
      })
      assert.equal(refused.status, 409, `${JSON.stringify(change)}: ${refused.text}`)
      assert.equal(refused.body.error, 'read_only_field')
      assert.deepEqual(
        refused.body.fields.map((f: { path: string }) => f.path),
        fields,
      )
      for (const field of fields) assert.ok(refused.body.message.includes(field), refused.body.message)
    }
    const after = await service.request('GET', path, { key: tenant.key })
    assert.equal(after.body.name, 'Dashboard', 'a refused PUT changes nothing')
  })

  test('machine_to_machine needs no redirectUris (absent is none); the other types still need one', async () => {
    const tenant = await service.createTenant()
    const m2m = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Nightly sync', applicationType: 'machine_to_machine' },
    })
    assert.equal(m2m.status, 201, m2m.text)
    assert.deepEqual(m2m.body.redirectUris, [])
    assert.match(m2m.body.clientSecret, /^cs_/)
    const renamed = await service.request('PUT', `/api/v1/applications/${m2m.body.id}`, {
      key: tenant.key,
      body: { name: 'Nightly sync (EU)' },
    })
    assert.equal(renamed.status, 200, renamed.text)
    assert.deepEqual(renamed.body.redirectUris, [])
    const { redirectUris: _none, ...withoutRedirects } = spa
    const refused = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: withoutRedirects,
    })
    assert.equal(refused.status, 400, refused.text)
    assert.deepEqual(refused.body.fields[0].path, 'body/redirectUris')
    assert.match(refused.body.message, /at least one URI for spa/)
  })

  test('secret rotation: a new secret once; public types have none to rotate', async () => {
    const tenant = await service.createTenant()
    const m2m = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Batch job',
        applicationType: 'machine_to_machine',
        redirectUris: [],
        resources: ['https://api.example.com'],
      },
    })
    assert.equal(m2m.status, 201, m2m.text)
    const rotated = await service.request('POST', `/api/v1/applications/${m2m.body.id}/rotate-secret`, {
      key: tenant.key,
    })
    assert.equal(rotated.status, 200, rotated.text)
    assert.match(rotated.body.clientSecret, /^cs_/)
    assert.notEqual(rotated.body.clientSecret, m2m.body.clientSecret)
    const pub = await service.request('POST', '/api/v1/applications', { key: tenant.key, body: spa })
    const refused = await service.request('POST', `/api/v1/applications/${pub.body.id}/rotate-secret`, {
      key: tenant.key,
    })
    assert.equal(refused.status, 409)
    assert.equal(refused.body.error, 'public_client')
  })

  test('bad input names the field: URIs, redirect rules per type, names', async () => {
    const tenant = await service.createTenant()
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...spa, redirectUris: ['not a uri'] }, 'body/redirectUris/0'],
      [{ ...spa, redirectUris: ['https://a.example.com/cb#frag'] }, 'body/redirectUris/0'],
      [{ ...spa, redirectUris: ['javascript:alert(1)'] }, 'body/redirectUris/0'],
      [{ ...spa, redirectUris: ['com.example.app:/cb'] }, 'body/redirectUris/0'],
      [{ ...spa, redirectUris: [] }, 'body/redirectUris'],
      [
        { ...spa, redirectUris: ['https://a.example.com/cb', 'https://a.example.com/cb'] },
        'body/redirectUris',
      ],
      [{ ...spa, applicationType: 'machine_to_machine' }, 'body/redirectUris'],
      [{ ...spa, resources: ['relative/path'] }, 'body/resources/0'],
      [{ ...spa, applicationType: 'daemon' }, 'body/applicationType'],
      [{ ...spa, name: ' padded ' }, 'body/name'],
    ]
    for (const [body, field] of cases) {
      const refused = await service.request('POST', '/api/v1/applications', { key: tenant.key, body })
      assert.equal(refused.status, 400, JSON.stringify(body))
      assert.ok(refused.text.includes(field), `${JSON.stringify(body)} names ${field}: ${refused.text}`)
    }
    // A native application may use its own scheme.
    const native = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: { name: 'Phone', applicationType: 'native', redirectUris: ['com.example.app:/cb'] },
    })
    assert.equal(native.status, 201, native.text)
    assert.equal(
      (await service.request('GET', '/api/v1/applications', { key: tenant.key })).body.total,
      1,
      'nothing else was stored',
    )
  })

  test('another tenant’s application is a 404 for every route; scopes are enforced; a developer session may register one', async () => {
    const owner = await service.createTenant()
    const other = await service.createTenant()
    const created = await service.request('POST', '/api/v1/applications', { key: owner.key, body: spa })
    const id = created.body.id
    const body = { name: 'x', redirectUris: spa.redirectUris }
    for (const [method, path, payload] of [
      ['GET', `/api/v1/applications/${id}`, undefined],
      ['PUT', `/api/v1/applications/${id}`, body],
      ['POST', `/api/v1/applications/${id}/rotate-secret`, undefined],
      ['DELETE', `/api/v1/applications/${id}`, undefined],
    ] as const) {
      const res = await service.request(method, path, {
        key: other.key,
        ...(payload ? { body: payload } : {}),
      })
      assert.equal(res.status, 404, `${method} ${path}`)
      assert.equal(res.body.error, 'application_not_found')
    }
    assert.equal((await service.request('GET', '/api/v1/applications', { key: other.key })).body.total, 0)

    const reader = await service.request('POST', '/api/v1/api-keys', {
      key: owner.key,
      body: { name: 'r', scopes: ['applications:read'] },
    })
    const write = await service.request('POST', '/api/v1/applications', { key: reader.body.key, body: spa })
    assert.equal(write.status, 403)
    assert.equal(write.body.error, 'insufficient_scope')

    const client = await consoleClient(service.baseUrl, REDIRECT)
    const dev = await memberSession(service, client, owner.tenantId, 'tenant:developer')
    const byDev = await service.request('POST', '/api/v1/applications', {
      headers: dev.headers,
      body: { ...spa, name: 'By a developer' },
    })
    assert.equal(byDev.status, 201, byDev.text)
    const viewer = await memberSession(service, client, owner.tenantId, 'tenant:viewer')
    assert.equal(
      (await service.request('POST', '/api/v1/applications', { headers: viewer.headers, body: spa })).status,
      403,
    )

    const removed = await service.request('DELETE', `/api/v1/applications/${id}`, { key: owner.key })
    assert.equal(removed.status, 204)
    assert.equal((await service.request('GET', `/api/v1/applications/${id}`, { key: owner.key })).status, 404)
  })

  test('mfaMethods, branding and signUpEnabled: stored, kept when left out of a PUT, removed by null; the panel’s bounds are 400s', async () => {
    const tenant = await service.createTenant()
    const panel = {
      imageUrl: 'https://cdn.example.com/orders.png',
      translations: { fr: { title: 'Commandes', text: 'Connectez-vous.' } },
    }
    const mfa = {
      totp: { enabled: true, required: false },
      emailOtp: { enabled: true, required: true },
      smsOtp: { enabled: false, required: false },
    }
    const created = await service.request('POST', '/api/v1/applications', {
      key: tenant.key,
      body: {
        name: 'Orders',
        applicationType: 'spa',
        redirectUris: ['https://orders.example.com/cb'],
        mfaMethods: mfa,
        branding: { loginPanel: panel },
        signUpEnabled: true,
      },
    })
    assert.equal(created.status, 201, created.text)
    assert.deepEqual(created.body.mfaMethods, mfa)
    assert.deepEqual(created.body.branding, { loginPanel: panel })
    assert.equal(created.body.signUpEnabled, true)
    const id = created.body.id
    const put = (body: Record<string, unknown>) =>
      service.request('PUT', `/api/v1/applications/${id}`, {
        key: tenant.key,
        body: { name: 'Orders', redirectUris: ['https://orders.example.com/cb'], ...body },
      })
    const kept = await put({})
    assert.deepEqual(kept.body.mfaMethods, mfa)
    assert.deepEqual(kept.body.branding, { loginPanel: panel })
    assert.equal(kept.body.signUpEnabled, true)
    const cleared = await put({ mfaMethods: null, branding: null, signUpEnabled: false })
    assert.equal(cleared.body.mfaMethods, null)
    assert.equal(cleared.body.branding, null)
    assert.equal(cleared.body.signUpEnabled, false)
    const audit = await service.request('GET', '/api/v1/audit?action=applications.update', {
      key: tenant.key,
    })
    assert.deepEqual(audit.body.data[0].details, {
      resources: 'kept',
      mfaMethods: 'cleared',
      branding: 'cleared',
      signUp: 'disabled',
    })
    for (const [loginPanel, field] of [
      [{ imageUrl: 'javascript:alert(1)' }, 'body/branding/loginPanel/imageUrl'],
      [
        { translations: { en: { title: 'x'.repeat(501), text: '' } } },
        'body/branding/loginPanel/translations/en/title',
      ],
      [
        { translations: { es: { title: 'x', text: 'y'.repeat(1001) } } },
        'body/branding/loginPanel/translations/es/text',
      ],
    ] as const) {
      const refused = await put({ branding: { loginPanel } })
      assert.equal(refused.status, 400, JSON.stringify(loginPanel))
      // A nullable object is a union: the 400 names it, and the message the field inside it.
      const { path, message } = refused.body.fields[0]
      assert.equal(`${path}${path === field ? '' : message.split(' ')[0]}`, field, refused.text)
    }
  })
})
