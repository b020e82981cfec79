import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { describe, test } from 'node:test'
import { argon2id } from '@noble/hashes/argon2.js'
import { ARGON2ID_PARAMS, hashPassword, verifyPassword } from '../../src/identity/accounts/password-hash.ts'
import { base32Encode, matchTotp, otpauthUri, TOTP, totpCode } from '../../src/identity/accounts/totp.ts'

describe('argon2id password hashes', () => {
  test('the stored hash is argon2id with the documented parameters, and an independent implementation derives the same tag', async () => {
    const password = 'correct horse battery staple ✓'
    const stored = await hashPassword(password)
    const match = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([^$]+)\$([^$]+)$/.exec(stored)
    assert.ok(match, stored)
    assert.deepEqual(
      [Number(match[1]), Number(match[2]), Number(match[3])],
      [ARGON2ID_PARAMS.memoryKiB, ARGON2ID_PARAMS.passes, ARGON2ID_PARAMS.parallelism],
    )
    const salt = Buffer.from(match[4]!, 'base64')
    const tag = Buffer.from(match[5]!, 'base64')
    assert.equal(salt.length, ARGON2ID_PARAMS.saltBytes)
    // @noble/hashes: a pure JavaScript argon2id, not OpenSSL.
    const independent = argon2id(Buffer.from(password, 'utf8'), salt, {
      t: ARGON2ID_PARAMS.passes,
      m: ARGON2ID_PARAMS.memoryKiB,
      p: ARGON2ID_PARAMS.parallelism,
      dkLen: tag.length,
    })
    assert.deepEqual(Buffer.from(independent), tag)
  })

  test('verification accepts the password, refuses another, and refuses a malformed stored hash', async () => {
    const stored = await hashPassword('a long enough password')
    assert.equal(await verifyPassword('a long enough password', stored), true)
    assert.equal(await verifyPassword('a long enough passworD', stored), false)
    assert.equal(await verifyPassword('a long enough password', stored.replace('argon2id', 'argon2i')), false)
    assert.equal(await verifyPassword('x', 'not a hash'), false)
  })

  test('two hashes of one password differ (random salt)', async () => {
    assert.notEqual(await hashPassword('same password here'), await hashPassword('same password here'))
  })
})

describe('TOTP (RFC 6238)', () => {
  // RFC 6238 appendix B, SHA-1 secret; the RFC prints 8 digits, a 6-digit code is their last 6.
  const secret = Buffer.from('12345678901234567890', 'ascii')
  const vectors: Array<[number, string]> = [
    [59, '94287082'],
    [1111111109, '07081804'],
    [1111111111, '14050471'],
    [1234567890, '89005924'],
    [2000000000, '69279037'],
    [20000000000, '65353130'],
  ]
  for (const [seconds, eight] of vectors) {
    test(`T = ${seconds}: ${eight.slice(2)}`, () => {
      assert.equal(totpCode(secret, Math.floor(seconds / TOTP.periodSeconds)), eight.slice(2))
      assert.equal(matchTotp(secret, eight.slice(2), seconds * 1000), Math.floor(seconds / 30))
    })
  }

  test('one step of drift either way is accepted, two are not; malformed codes never match', () => {
    const at = 1_700_000_000_000
    const step = Math.floor(at / 30_000)
    assert.equal(matchTotp(secret, totpCode(secret, step - 1), at), step - 1)
    assert.equal(matchTotp(secret, totpCode(secret, step + 1), at), step + 1)
    assert.equal(matchTotp(secret, totpCode(secret, step - 2), at), undefined)
    assert.equal(matchTotp(secret, '12345', at), undefined)
    assert.equal(matchTotp(secret, '12345a', at), undefined)
  })

  test('the code matches an independent HOTP computation, and the otpauth URI carries the Base32 secret', () => {
    const step = 123456
    const counter = Buffer.alloc(8)
    counter.writeBigUInt64BE(BigInt(step))
    const mac = createHmac('sha1', secret).update(counter).digest()
    const offset = mac[19]! & 15
    const code = ((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).toString().padStart(6, '0')
    assert.equal(totpCode(secret, step), code)
    // RFC 4648 test vector: "foobar" → MZXW6YTBOI
    assert.equal(base32Encode(Buffer.from('foobar')), 'MZXW6YTBOI')
    const uri = new URL(otpauthUri(secret, 'a@example.com', 'KMS'))
    assert.equal(uri.protocol, 'otpauth:')
    assert.equal(uri.searchParams.get('secret'), base32Encode(secret))
    assert.equal(uri.searchParams.get('digits'), '6')
  })
})
