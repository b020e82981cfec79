import { createHmac } from 'node:crypto'

/**
 * The tests' own TOTP (RFC 6238: HMAC-SHA1, 30 s steps, 6 digits), from the Base32 secret a page
 * shows, written from the RFC rather than taken from the service's code.
 */
export function totpCode(base32: string, atMs = Date.now()): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'
  let bits = ''
  for (const c of base32.replace(/=+$/, '')) bits += alphabet.indexOf(c).toString(2).padStart(5, '0')
  const bytes = Buffer.from(bits.match(/.{8}/g)!.map((b) => Number.parseInt(b, 2)))
  const counter = Buffer.alloc(8)
  counter.writeBigUInt64BE(BigInt(Math.floor(atMs / 30_000)))
  const mac = createHmac('sha1', bytes).update(counter).digest()
  const offset = mac[19]! & 15
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, '0')
}
