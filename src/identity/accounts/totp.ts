import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

/** RFC 6238 TOTP with the parameters every authenticator app supports: HMAC-SHA1, 30 s, 6 digits. */
export const TOTP = { periodSeconds: 30, digits: 6, secretBytes: 20, skewSteps: 1 } as const

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'

export function base32Encode(bytes: Uint8Array): string {
  let bits = 0
  let value = 0
  let out = ''
  for (const byte of bytes) {
    value = (value << 8) | byte
    bits += 8
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31]
  return out
}

export const newTotpSecret = (): Buffer => randomBytes(TOTP.secretBytes)

export function totpCode(secret: Uint8Array, step: number): string {
  const counter = Buffer.alloc(8)
  counter.writeBigUInt64BE(BigInt(step))
  const mac = createHmac('sha1', secret).update(counter).digest()
  const offset = mac[mac.length - 1]! & 0x0f
  const binary = mac.readUInt32BE(offset) & 0x7fffffff
  return String(binary % 10 ** TOTP.digits).padStart(TOTP.digits, '0')
}

export const stepAt = (epochMs: number): number => Math.floor(epochMs / 1000 / TOTP.periodSeconds)

/**
 * The time step the code belongs to (now, one before or one after, for clock drift), or
 * undefined. Every candidate is compared, in constant time, so timing says nothing of which matched.
 */
export function matchTotp(secret: Uint8Array, code: string, epochMs: number): number | undefined {
  if (!/^\d{6}$/.test(code)) return undefined
  const now = stepAt(epochMs)
  let matched: number | undefined
  for (let delta = -TOTP.skewSteps; delta <= TOTP.skewSteps; delta++) {
    const step = now + delta
    if (timingSafeEqual(Buffer.from(totpCode(secret, step)), Buffer.from(code)) && matched === undefined)
      matched = step
  }
  return matched
}

export function otpauthUri(secret: Uint8Array, account: string, issuer: string): string {
  const label = encodeURIComponent(`${issuer}:${account}`)
  const params = new URLSearchParams({
    secret: base32Encode(secret),
    issuer,
    algorithm: 'SHA1',
    digits: String(TOTP.digits),
    period: String(TOTP.periodSeconds),
  })
  return `otpauth://totp/${label}?${params}`
}
