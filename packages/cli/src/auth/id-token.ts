import { createHash, createPublicKey, type JsonWebKey, timingSafeEqual, verify } from 'node:crypto'
import { CliError, EXIT } from '../command.ts'
import { CLIENT_ID, type ProviderMetadata } from './oauth.ts'

/** Clock difference allowed between this machine and the service. */
const LEEWAY_SECONDS = 60

export interface IdentityClaims {
  sub: string
  email: string | undefined
}

const decode = (segment: string): Record<string, unknown> | undefined => {
  try {
    const value = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8')) as unknown
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined
  } catch {
    return undefined
  }
}

const sameText = (a: string, b: string) => {
  const x = createHash('sha256').update(a).digest()
  const y = createHash('sha256').update(b).digest()
  return timingSafeEqual(x, y)
}

const refused = (why: string) =>
  new CliError('invalid_id_token', `the sign-in's ID token was refused: ${why}`, EXIT.auth)

/**
 * Checks the ID token of a sign-in: ES256 signed by a key of the provider's JWKS, from this
 * issuer, for this client, unexpired, and (browser sign-in) carrying the nonce this login sent,
 * so a token of another sign-in cannot be slipped in. Returns who signed in.
 */
export async function verifyIdToken(
  idToken: string,
  metadata: ProviderMetadata,
  expected: { nonce: string | undefined; now?: number },
): Promise<IdentityClaims> {
  const parts = idToken.split('.')
  if (parts.length !== 3) throw refused('not a JWT')
  const [headerText, payloadText, signatureText] = parts as [string, string, string]
  const header = decode(headerText)
  const claims = decode(payloadText)
  if (!header || !claims) throw refused('not a JWT')
  if (header['alg'] !== 'ES256' || typeof header['kid'] !== 'string') throw refused('not ES256 with a key id')

  const response = await fetch(metadata.jwksUri, { signal: AbortSignal.timeout(30_000) }).catch((err) => {
    throw new CliError(
      'unavailable',
      `the provider's keys could not be read: ${(err as Error).message}`,
      EXIT.unavailable,
    )
  })
  const jwks = (await response.json().catch(() => undefined)) as { keys?: JsonWebKey[] } | undefined
  const jwk = jwks?.keys?.find(
    (key) => key['kid'] === header['kid'] && key.kty === 'EC' && key.crv === 'P-256',
  )
  if (!jwk) throw refused('signed by a key the provider does not publish')
  const { kid: _kid, use: _use, alg: _alg, key_ops: _ops, ...publicJwk } = jwk
  const key = createPublicKey({ key: publicJwk, format: 'jwk' })
  const signed = Buffer.from(`${headerText}.${payloadText}`, 'ascii')
  if (!verify('sha256', signed, { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(signatureText, 'base64url')))
    throw refused('bad signature')

  const now = expected.now ?? Math.floor(Date.now() / 1000)
  if (claims['iss'] !== metadata.issuer) throw refused('another issuer')
  const audience = claims['aud']
  if (!(audience === CLIENT_ID || (Array.isArray(audience) && audience.includes(CLIENT_ID))))
    throw refused('for another client')
  if (typeof claims['exp'] !== 'number' || claims['exp'] + LEEWAY_SECONDS < now) throw refused('expired')
  if (expected.nonce !== undefined) {
    const nonce = claims['nonce']
    if (typeof nonce !== 'string' || !sameText(nonce, expected.nonce))
      throw refused('another sign-in’s nonce')
  }
  if (typeof claims['sub'] !== 'string') throw refused('no subject')
  return { sub: claims['sub'], email: typeof claims['email'] === 'string' ? claims['email'] : undefined }
}
