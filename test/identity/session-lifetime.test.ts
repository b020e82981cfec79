import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { type ManualClock, manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TestService } from '../helpers/service.ts'
import { type ConsoleClient, consoleClient, follow, memberSession, signIn } from '../helpers/sign-in.ts'

/**
 * A tenant's session lifetime (`sessionLifetimes.refreshTokenSeconds`) bounds a sign-in, not only
 * its refresh tokens: a silent authorization on the provider's longer session (what a reload of
 * the console does) asks for the password again once the sign-in is older than a tenant of the
 * authorization allows. Time is the service's manual clock; nothing waits.
 */
describe('a tenant session lifetime bounds silent sign-ins', () => {
  let clock: ManualClock
  let service: TestService
  let client: ConsoleClient
  const redirectUri = 'http://127.0.0.1:9/callback'

  before(async () => {
    clock = manualClock()
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: redirectUri }, { clock })
    client = await consoleClient(service.baseUrl, redirectUri)
  })
  after(() => service?.stop())

  /** A new authorization for the tenant on the session in `jar`: the callback, or the page shown. */
  const authorize = async (jar: Awaited<ReturnType<typeof signIn>>['jar'], tenantId: string) => {
    const url = oidc.buildAuthorizationUrl(client.config, {
      redirect_uri: redirectUri,
      scope: 'openid email profile api',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      resource: `urn:kms:tenant:${tenantId}`,
      state: oidc.randomState(),
    })
    return follow(jar, service.baseUrl, url.toString(), redirectUri)
  }

  test('past the tenant lifetime the password is asked again; another tenant with the default is still silent', async () => {
    const strict = await service.createTenant()
    const relaxed = await service.createTenant()
    const owner = await memberSession(service, client, strict.tenantId, 'tenant:owner')
    const patched = await service.request('PATCH', '/api/v1/settings/security', {
      headers: owner.headers,
      body: { sessionLifetimes: { refreshTokenSeconds: 300 } },
    })
    assert.equal(patched.status, 200, patched.text)
    await service.api.services.team.addMember(
      { tenantId: relaxed.tenantId, actor: 'test', requestId: null, clientIp: null },
      { accountId: owner.accountId, role: 'tenant:viewer' },
    )
    const { jar } = await signIn(service.baseUrl, client, {
      email: owner.email,
      password: owner.password,
      resource: `urn:kms:tenant:${strict.tenantId}`,
    })

    // The provider stamps the sign-in with the real time; the manual clock starts from there.
    clock.set(new Date())
    // Within the lifetime: silent, for both tenants.
    clock.advance(295_000)
    assert.ok((await authorize(jar, strict.tenantId)).callback, 'silent within 300 s')
    assert.ok((await authorize(jar, relaxed.tenantId)).callback)

    // Past it: the strict tenant's authorization shows the sign-in page (the password field).
    clock.advance(10_000)
    const again = await authorize(jar, strict.tenantId)
    assert.equal(again.callback, undefined, 'no code without a new sign-in')
    assert.match(again.page?.html ?? '', /name="password"/)
    // The tenant with the default lifetime (14 days) is unaffected by the other's setting.
    assert.ok((await authorize(jar, relaxed.tenantId)).callback)
  })
})
