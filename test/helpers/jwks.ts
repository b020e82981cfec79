import assert from 'node:assert/strict'
import { createPublicKey, verify } from 'node:crypto'

/** Verifies a compact JWS with node:crypto against the published JWKS (not the provider's own code). */
export async function verifyAgainstJwks(
  baseUrl: string,
  jwt: string,
): Promise<{ header: Record<string, unknown>; claims: Record<string, unknown> }> {
  const [h, p, s] = jwt.split('.') as [string, string, string]
  const header = JSON.parse(Buffer.from(h, 'base64url').toString()) as Record<string, unknown>
  const jwks = (await (await fetch(new URL('/.well-known/jwks.json', baseUrl))).json()) as {
    keys: Array<Record<string, unknown>>
  }
  const jwk = jwks.keys.find((key) => key['kid'] === header['kid'])
  assert.ok(jwk, `kid ${String(header['kid'])} is published`)
  assert.equal(jwk['d'], undefined, 'the JWKS holds no private part')
  assert.equal(header['alg'], 'ES256')
  const key = createPublicKey({ key: jwk as never, format: 'jwk' })
  assert.ok(
    verify(
      'sha256',
      Buffer.from(`${h}.${p}`),
      { key, dsaEncoding: 'ieee-p1363' },
      Buffer.from(s, 'base64url'),
    ),
    'signature verifies',
  )
  return { header, claims: JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown> }
}
