import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { getLoopback, startKms } from '../helpers/kms-cli.ts'
import { PROJECT_ROOT, startTestService, type TestService } from '../helpers/service.ts'

/*
 * The authorization-server mix-up (RFC 9207, OAuth 2.0 Security BCP 4.4) against `kms login`: a
 * server at --addr that passes everything on to the real service but rewrites its discovery
 * document. Copying the real document with its own token endpoint, it would have the person sign
 * in on the real pages and then receive the code with its PKCE verifier, and the tokens. The CLI
 * trusts the document only as the provider of --addr's origin, with every endpoint there, and an
 * answer on its loopback listener only when it names that issuer (`iss`).
 */

/** The endpoints of the discovery document the CLI uses. */
const ENDPOINTS = [
  'authorization_endpoint',
  'token_endpoint',
  'jwks_uri',
  'revocation_endpoint',
  'device_authorization_endpoint',
] as const

interface Seen {
  method: string
  path: string
}

/**
 * A server in front of the real service: the discovery document goes through `rewrite` (given the
 * real document and this server's origin), every other request is passed on as it is. Records
 * what it was asked.
 */
async function interposer(
  serviceUrl: string,
  rewrite: (real: Record<string, unknown>, origin: string) => Record<string, unknown>,
): Promise<{ origin: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = []
  let origin = ''
  const server = createServer(async (req, res) => {
    seen.push({ method: req.method ?? '', path: new URL(req.url ?? '/', origin).pathname })
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const upstream = await fetch(`${serviceUrl}${req.url}`, {
      method: req.method,
      headers: { 'content-type': req.headers['content-type'] ?? 'application/octet-stream' },
      ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
      redirect: 'manual',
    })
    const text = await upstream.text()
    const body =
      req.url === '/.well-known/openid-configuration'
        ? JSON.stringify(rewrite(JSON.parse(text) as Record<string, unknown>, origin))
        : text
    res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'text/plain' })
    res.end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { origin, seen, server }
}

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })

/** The same URL at another origin. */
const moved = (url: unknown, origin: string) => {
  const parsed = new URL(String(url))
  return `${origin}${parsed.pathname}${parsed.search}`
}

describe('kms login against a server that rewrites the provider’s discovery document', {
  timeout: 120_000,
}, () => {
  let service: TestService
  let issuer: string
  const dirs: string[] = []
  const servers: Server[] = []

  before(async () => {
    service = await startTestService()
    const real = (await (await fetch(`${service.baseUrl}/.well-known/openid-configuration`)).json()) as {
      issuer: string
    }
    issuer = real.issuer
    assert.equal(new URL(issuer).origin, new URL(service.baseUrl).origin)
  })
  after(async () => {
    for (const server of servers) await closeServer(server)
    await service?.stop()
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })

  /** The CLI's variables: a fresh config dir, this address and a tenant (any id: nothing gets that far). */
  function cliEnv(addr: string) {
    const home = mkdtempSync(join(tmpdir(), 'kms-cli-mixup-'))
    dirs.push(home)
    const configDir = join(home, 'config')
    return {
      credentialsPath: join(configDir, 'credentials.json'),
      env: {
        HOME: home,
        KMS_ADDR: addr,
        KMS_CONFIG_DIR: configDir,
        KMS_CREDENTIAL_STORE: 'file',
        KMS_TENANT: randomUUID(),
      },
    }
  }

  /**
   * `kms login` with these arguments, to its exit, or stopped as soon as it shows where to sign in
   * (then the document was trusted: the test fails on `shown` rather than wait for the sign-in).
   */
  async function loginUntilShown(args: string[], env: Record<string, string>) {
    const run = startKms(args, { cwd: PROJECT_ROOT, env })
    const shown = await Promise.race([
      run.exited.then(() => false),
      run.waitForStderr(/oidc\/auth\?|enter the code/).then(
        () => true,
        () => false,
      ),
    ])
    if (shown) run.child.kill('SIGKILL')
    const { code } = await run.exited
    return { code, stderr: run.stderr(), shown }
  }

  async function interposed(rewrite: Parameters<typeof interposer>[1]) {
    const found = await interposer(service.baseUrl, rewrite)
    servers.push(found.server)
    return found
  }

  test('the real document served at another address (its token endpoint swapped) is refused before any URL is shown or any code sent', async () => {
    const evil = await interposed((real, origin) => ({ ...real, token_endpoint: `${origin}/token` }))
    const { env, credentialsPath } = cliEnv(evil.origin)
    for (const args of [
      ['login', '--no-browser'],
      ['login', '--device'],
    ]) {
      const run = await loginUntilShown(args, env)
      assert.equal(run.shown, false, run.stderr)
      assert.equal(run.code, 3, run.stderr)
      assert.equal(
        run.stderr,
        `kms: issuer_mismatch: the discovery document at ${evil.origin}/.well-known/openid-configuration names the issuer "${issuer}", not one at ${evil.origin}: ` +
          'kms signs in only with the provider of the address it talks to (--addr); if this service is published at its issuer address, use that as --addr\n',
      )
      assert.doesNotMatch(run.stderr, /oidc\/auth|enter the code/)
    }
    assert.deepEqual(
      evil.seen,
      [1, 2].map(() => ({ method: 'GET', path: '/.well-known/openid-configuration' })),
      'only the discovery document was asked for',
    )
    assert.equal(existsSync(credentialsPath), false, 'nothing stored')
  })

  for (const endpoint of ENDPOINTS)
    test(`a document naming its server as issuer but ${endpoint} at another origin is refused, nothing sent there`, async () => {
      // The issuer and every other endpoint on the interposed server; this one at the real service.
      const evil = await interposed((real, origin) => {
        const document: Record<string, unknown> = { ...real, issuer: origin }
        for (const name of ENDPOINTS) document[name] = moved(real[name], origin)
        document[endpoint] = real[endpoint]
        return document
      })
      const { env, credentialsPath } = cliEnv(evil.origin)
      const run = await loginUntilShown(
        ['login', endpoint.startsWith('device') ? '--device' : '--no-browser'],
        env,
      )
      assert.equal(run.shown, false, run.stderr)
      assert.equal(run.code, 3, run.stderr)
      assert.match(
        run.stderr,
        new RegExp(
          `^kms: issuer_mismatch: the discovery document at \\S+ sends ${endpoint} to "${service.baseUrl}/\\S+", away from its issuer ${evil.origin}: refused, nothing was sent\\n$`,
        ),
      )
      assert.deepEqual(evil.seen, [{ method: 'GET', path: '/.well-known/openid-configuration' }])
      assert.equal(existsSync(credentialsPath), false)
    })

  test('an answer on the loopback listener without iss, or naming another issuer, is refused and its code never exchanged; the right iss is', async () => {
    // A consistent document (issuer and endpoints all at the interposed server): accepted, so the
    // login gets to its listener. The real provider names itself (the service's issuer) in `iss`.
    const proxy = await interposed((real, origin) => {
      const document: Record<string, unknown> = { ...real, issuer: origin }
      for (const name of ENDPOINTS) document[name] = moved(real[name], origin)
      return document
    })
    const tokenRequests = () => proxy.seen.filter((s) => s.method === 'POST' && s.path === '/oidc/token')

    const answer = async (iss: string | undefined) => {
      const run = startKms(['login', '--no-browser'], { cwd: PROJECT_ROOT, env: cliEnv(proxy.origin).env })
      const [, printed] = await run.waitForStderr(/(http:\/\/\S+\/oidc\/auth\?\S+)/)
      const url = new URL(printed!)
      assert.equal(url.origin, proxy.origin)
      const callback = new URL(url.searchParams.get('redirect_uri')!)
      callback.searchParams.set('code', 'a-code-from-somewhere')
      callback.searchParams.set('state', url.searchParams.get('state')!)
      if (iss !== undefined) callback.searchParams.set('iss', iss)
      const page = await getLoopback(callback.toString())
      return { run, page, exit: await run.exited }
    }

    const withoutIss = await answer(undefined)
    assert.equal(withoutIss.page.status, 400)
    assert.match(withoutIss.page.body, /did not come from the service kms signs in with/)
    assert.equal(withoutIss.exit.code, 3)
    assert.match(
      withoutIss.run.stderr(),
      new RegExp(
        `^kms: login_failed: the sign-in answer did not name its issuer \\(iss, RFC 9207\\); expected ${proxy.origin}: refused$`,
        'm',
      ),
    )

    const otherIss = await answer(issuer)
    assert.equal(otherIss.page.status, 400)
    assert.equal(otherIss.exit.code, 3)
    assert.match(
      otherIss.run.stderr(),
      new RegExp(
        `^kms: login_failed: the sign-in answer came from the issuer "${issuer}", not ${proxy.origin}: refused$`,
        'm',
      ),
    )
    assert.deepEqual(tokenRequests(), [], 'no code was sent to a token endpoint')

    // The control: with the issuer's name the code does go to the token endpoint (where the real
    // provider refuses this made-up code).
    const rightIss = await answer(proxy.origin)
    assert.equal(rightIss.exit.code, 3)
    assert.match(rightIss.run.stderr(), /^kms: invalid_grant: /m)
    assert.equal(tokenRequests().length, 1)
  })
})
