import { spawn } from 'node:child_process'
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { CliError, EXIT, type Io } from '../command.ts'
import {
  CLIENT_ID,
  type ProviderMetadata,
  SCOPE,
  type TokenAnswer,
  tenantResource,
  tokenRequest,
} from './oauth.ts'

/*
 * `kms login`: the authorization code flow of a native app (RFC 8252) with PKCE (S256), state and
 * nonce. The browser comes back to a listener on 127.0.0.1 on a port the system picks (the
 * provider accepts any port of its registered loopback URI); the listener takes exactly one
 * answer that carries this login's state, and trusts it only when it names the provider's issuer
 * (RFC 9207 `iss`).
 */

const random = (bytes: number) => randomBytes(bytes).toString('base64url')

const sameText = (a: string, b: string) =>
  timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest())

/** The OS's opener; `start` is not used on Windows: cmd would read the URL's `&` as a command separator. */
function openInBrowser(url: string): void {
  const [command, args] =
    process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['rundll32', ['url.dll,FileProtocolHandler', url]]
        : ['xdg-open', [url]]
  try {
    const child = spawn(command, args as string[], { stdio: 'ignore', detached: true })
    // No opener (a server, a container): the URL is printed anyway.
    child.on('error', () => {})
    child.unref()
  } catch {}
}

const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': "default-src 'none'",
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  // The browser does not keep the connection: the listener closes as soon as the login ends.
  connection: 'close',
}
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

function answerPage(res: ServerResponse, status: number, title: string, text: string): void {
  res.writeHead(status, PAGE_HEADERS)
  res.end(
    `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>kms: ${escapeHtml(title)}</title></head>` +
      `<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p></body></html>\n`,
  )
}

export interface BrowserLoginOptions {
  tenant: string
  openBrowser: boolean
  timeoutMs: number
}

/** The token answer and the nonce its ID token must carry. */
export interface BrowserLoginResult {
  answer: TokenAnswer
  nonce: string
}

/**
 * Runs the browser sign-in to the end: prints (and opens) the authorization URL, waits for the
 * one callback with this login's state, exchanges its code for tokens of the tenant's resource,
 * and only then tells the browser it worked.
 */
export async function browserLogin(
  metadata: ProviderMetadata,
  io: Io,
  options: BrowserLoginOptions,
): Promise<BrowserLoginResult> {
  const verifier = random(32)
  const state = random(24)
  const nonce = random(24)
  const resource = tenantResource(options.tenant)

  let settle: { resolve(value: BrowserLoginResult): void; reject(err: unknown): void } | undefined
  const outcome = new Promise<BrowserLoginResult>((resolve, reject) => {
    settle = { resolve, reject }
  })
  let redirectUri = ''
  let answered = false

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1')
    if (req.method !== 'GET' || url.pathname !== '/callback') {
      answerPage(res, 404, 'Not found', 'kms is waiting for its sign-in at /callback only.')
      return
    }
    if (answered) {
      answerPage(res, 409, 'Already signed in', 'This sign-in has already been answered.')
      return
    }
    const params = url.searchParams
    const returnedState = params.get('state')
    if (returnedState === null || !sameText(returnedState, state)) {
      // Not this login's answer (another tab, a forged link): refused, and the login waits on.
      io.stderr.write('kms: a sign-in answer with another state was refused; still waiting.\n')
      answerPage(
        res,
        400,
        'Refused',
        'This answer does not belong to the sign-in kms is waiting for, so it was refused. Start the sign-in from the link kms printed.',
      )
      return
    }
    answered = true
    // RFC 9207: the provider names itself in every answer, success or error (oidc-provider does).
    // An answer without that name, or with another, may come from another provider the browser
    // was sent to (a mix-up): its code is never exchanged and its error never believed.
    const issuer = params.get('iss')
    if (issuer !== metadata.issuer) {
      answerPage(
        res,
        400,
        'Sign-in failed',
        'The answer did not come from the service kms signs in with. Return to your terminal.',
      )
      settle?.reject(
        new CliError(
          'login_failed',
          issuer === null
            ? `the sign-in answer did not name its issuer (iss, RFC 9207); expected ${metadata.issuer}: refused`
            : `the sign-in answer came from the issuer ${JSON.stringify(issuer)}, not ${metadata.issuer}: refused`,
          EXIT.auth,
        ),
      )
      return
    }
    const error = params.get('error')
    if (error !== null) {
      const description = params.get('error_description')
      answerPage(
        res,
        400,
        'Sign-in failed',
        `${error}${description ? `: ${description}` : ''}. Return to your terminal.`,
      )
      settle?.reject(
        new CliError(error, `the sign-in failed${description ? `: ${description}` : ''}`, EXIT.auth),
      )
      return
    }
    const code = params.get('code')
    if (!code) {
      answerPage(res, 400, 'Sign-in failed', 'The answer carried no code. Return to your terminal.')
      settle?.reject(new CliError('login_failed', 'the sign-in answer carried no code', EXIT.auth))
      return
    }
    try {
      const answer = await tokenRequest(metadata.tokenEndpoint, {
        grant_type: 'authorization_code',
        code,
        redirect_uri: redirectUri,
        code_verifier: verifier,
        resource,
      })
      answerPage(res, 200, 'Signed in — return to your terminal', 'kms is signed in. You can close this tab.')
      settle?.resolve({ answer, nonce })
    } catch (err) {
      answerPage(res, 502, 'Sign-in failed', 'The code could not be exchanged. Return to your terminal.')
      settle?.reject(err)
    }
  }

  const server = createServer((req, res) => {
    onRequest(req, res).catch((err: unknown) => settle?.reject(err))
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) =>
      reject(new CliError('login_failed', `no loopback port to listen on: ${err.message}`, EXIT.failed)),
    )
    server.listen(0, '127.0.0.1', () => resolve())
  })
  redirectUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`
  const authorizationUrl = new URL(metadata.authorizationEndpoint)
  for (const [name, value] of Object.entries({
    client_id: CLIENT_ID,
    response_type: 'code',
    redirect_uri: redirectUri,
    scope: SCOPE,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    state,
    nonce,
    resource,
  }))
    authorizationUrl.searchParams.set(name, value)

  io.stderr.write(`Open this URL in a browser to sign in:\n\n  ${authorizationUrl}\n\n`)
  if (options.openBrowser) openInBrowser(authorizationUrl.toString())
  io.stderr.write(`Waiting for the sign-in (up to ${Math.round(options.timeoutMs / 1000)} s)…\n`)

  const timer = setTimeout(
    () =>
      settle?.reject(
        new CliError(
          'login_timeout',
          `no sign-in came back within ${Math.round(options.timeoutMs / 1000)} s (--timeout)`,
          EXIT.auth,
        ),
      ),
    options.timeoutMs,
  )
  try {
    return await outcome
  } finally {
    clearTimeout(timer)
    server.close()
    server.closeIdleConnections()
  }
}
