import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { createServer } from 'node:net'
import { after, before, describe, test } from 'node:test'
import * as oidc from 'openid-client'
import { startTestService, type TestService } from '../helpers/service.ts'

/**
 * One origin for everything the provider advertises: the issuer (ID_URL, or the URL the service
 * listens on). The Host a request names never moves an endpoint (docs/decisions.md, issue 30).
 */

/**
 * A GET with a Host header of our choosing (fetch does not let a caller set Host); `target` is the
 * request line's target as given (a path, or a URL: the absolute form).
 */
function getWithHost(
  baseUrl: string,
  target: string,
  host: string,
): Promise<{ status: number; body: string }> {
  const url = new URL(baseUrl)
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, path: target, headers: { host } },
      (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          body += chunk
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      },
    )
    req.on('error', reject)
    req.end()
  })
}

/** Every URL a discovery document names (endpoints, the JWKS, the issuer itself). */
function advertisedUrls(document: Record<string, unknown>): string[] {
  return Object.entries(document)
    .filter(
      ([name, value]) => typeof value === 'string' && (name === 'issuer' || /_(endpoint|uri)$/.test(name)),
    )
    .map(([, value]) => value as string)
}

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

describe('the issuer is the one origin of discovery', () => {
  let service: TestService
  let issuer: string
  let port: string

  before(async () => {
    service = await startTestService()
    issuer = service.api.services.identity.oidc.issuer()
    port = new URL(service.baseUrl).port
  })
  after(() => service?.stop())

  test('discovery fetched with a foreign or another local Host advertises only the issuer’s URLs', async () => {
    for (const host of ['evil.example', `localhost:${port}`, `evil.example:${port}`, '127.0.0.2']) {
      const answer = await getWithHost(service.baseUrl, '/.well-known/openid-configuration', host)
      assert.equal(answer.status, 200, host)
      const document = JSON.parse(answer.body) as Record<string, unknown>
      assert.equal(document['issuer'], issuer, host)
      const urls = advertisedUrls(document)
      assert.ok(urls.length >= 7, `the document names its endpoints (${host})`)
      for (const url of urls) assert.ok(url.startsWith(`${issuer}/`) || url === issuer, `${host}: ${url}`)
      assert.equal(document['authorization_endpoint'], `${issuer}/oidc/auth`, host)
    }
  })

  test('a request line in absolute form does not name the origin either', async () => {
    const answer = await getWithHost(
      service.baseUrl,
      'http://evil.example/.well-known/openid-configuration',
      'evil.example',
    )
    // Either it is not routed at all, or the answer names the issuer only.
    if (answer.status === 200) {
      for (const url of advertisedUrls(JSON.parse(answer.body))) assert.ok(url.startsWith(issuer), url)
    } else assert.ok(answer.status >= 400 && answer.status < 500, String(answer.status))
    assert.ok(!answer.body.includes('evil.example'))
  })

  test('the sign-out form posts to the issuer whatever the Host', async () => {
    const answer = await getWithHost(service.baseUrl, '/oidc/session/end', 'evil.example')
    assert.equal(answer.status, 200, answer.body.slice(0, 300))
    const action = /action="([^"]+)"/.exec(answer.body)?.[1]
    assert.ok(action, 'the page has a form')
    assert.ok(!action.includes('evil.example'), action)
    assert.ok(action.startsWith('/') || action.startsWith(`${issuer}/`), action)
  })

  test('openid-client: discovery through the issuer works; through another name it is refused (issuer mismatch), as the spec requires', async () => {
    const config = await oidc.discovery(new URL(issuer), 'kms-console', undefined, oidc.None(), {
      execute: [oidc.allowInsecureRequests],
    })
    assert.equal(config.serverMetadata().issuer, issuer)
    assert.equal(config.serverMetadata().token_endpoint, `${issuer}/oidc/token`)
    await assert.rejects(
      oidc.discovery(new URL(`http://localhost:${port}`), 'kms-console', undefined, oidc.None(), {
        execute: [oidc.allowInsecureRequests],
      }),
      (err: Error & { code?: string }) => {
        assert.match(`${err.message} ${err.code ?? ''}`, /issuer/i)
        return true
      },
    )
  })
})

describe('ID_URL names the origin clients use (here localhost)', () => {
  let service: TestService
  let idUrl: string

  before(async () => {
    const port = await freePort()
    idUrl = `http://localhost:${port}`
    service = await startTestService({ PORT: String(port), ID_URL: idUrl })
  })
  after(() => service?.stop())

  test('openid-client discovers through localhost, and the listening address advertises localhost too', async () => {
    const config = await oidc.discovery(new URL(idUrl), 'kms-console', undefined, oidc.None(), {
      execute: [oidc.allowInsecureRequests],
    })
    assert.equal(config.serverMetadata().issuer, idUrl)
    const direct = (await (
      await fetch(new URL('/.well-known/openid-configuration', service.baseUrl))
    ).json()) as Record<string, unknown>
    for (const url of advertisedUrls(direct)) assert.ok(url.startsWith(idUrl), url)
  })
})
