import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { AppError } from '../../src/platform/errors.ts'
import { parsePublicKeyLine } from '../../src/ssh/ssh-wire.ts'
import { mapConcurrently } from '../helpers/api-client.ts'
import { Rng } from '../helpers/rng.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'
import { fingerprintOf, type KeyPair, keygen, sshKeygenResult, type TempDir, tempDir } from './ssh-tools.ts'

/**
 * Seeded fuzz of what clients send the SSH CA: the public-key parser (src/ssh/ssh-wire.ts) in
 * process, and the body of POST /ssh/certificates over HTTP. Every malformed input is a 400
 * naming a field; nothing else escapes (no 5xx, no other exception), and whatever the parser
 * accepts, ssh-keygen accepts as the same key. Reproduce a failure with
 * `SSH_FUZZ_SEED=<seed> node --test test/ssh/ssh-fuzz.test.ts`; each failure names its case.
 */

const SEED = Number(process.env['SSH_FUZZ_SEED'] ?? 0x55_4b_e7)
const PARSER_CASES = 20_000
const ROUTE_CASES = 600
/** Accepted mutants checked again with ssh-keygen (each is a process start). */
const KEYGEN_SAMPLES = 40

let svc: TestService
let tenant: TenantWithKey
let dir: TempDir
let caId: string
const keys: KeyPair[] = []

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
  dir = tempDir('kms-ssh-fuzz-')
  for (const [type, bits] of [
    ['ed25519', undefined],
    ['ecdsa', 256],
    ['ecdsa', 384],
    ['ecdsa', 521],
    ['rsa', 2048],
  ] as const)
    keys.push(keygen(dir, `${type}-${bits ?? ''}`, type, bits))
  const ca = await svc.request('POST', '/api/v1/ssh/ca', { key: tenant.key, body: { type: 'user' } })
  assert.equal(ca.status, 201, ca.text)
  caId = ca.body.id
})
after(async () => {
  await svc?.stop()
  dir?.remove()
})

const TYPES = [
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'ssh-rsa',
  'ssh-dss',
  'sk-ssh-ed25519@openssh.com',
  'ssh-ed25519-cert-v01@openssh.com',
  '',
  'SSH-ED25519',
]

const uint32 = (n: number) => {
  const out = Buffer.alloc(4)
  out.writeUInt32BE(n >>> 0)
  return out
}
const wireString = (bytes: Buffer) => Buffer.concat([uint32(bytes.length), bytes])

/** A key blob made of random fields: right or wrong names, lengths that lie, random points. */
function randomBlob(rng: Rng): Buffer {
  const parts: Buffer[] = [wireString(Buffer.from(rng.pick(TYPES)))]
  const fields = rng.range(0, 4)
  for (let i = 0; i < fields; i++) {
    const kind = rng.int(5)
    if (kind === 0)
      parts.push(wireString(Buffer.from(rng.pick(['nistp256', 'nistp384', 'nistp521', 'nistp999']))))
    else if (kind === 1)
      parts.push(wireString(Buffer.concat([Buffer.of(4), rng.bytes(rng.pick([64, 96, 132, 10]))])))
    else if (kind === 2) parts.push(uint32(rng.pick([0xffffffff, 0x7fffffff, 65, 1 << 20])))
    else if (kind === 3) parts.push(wireString(rng.bytes(rng.pick([1, 3, 32, 33, 128, 256, 257, 513]))))
    else parts.push(rng.bytes(rng.range(0, 8)))
  }
  return Buffer.concat(parts)
}

/** A line derived from a real key: flipped bytes, cut or grown blobs, swapped types, noise. */
function mutatedLine(rng: Rng): string {
  const base = rng.pick(keys).publicLine
  const [type, encoded, comment] = base.split(' ') as [string, string, string]
  let blob: Buffer = Buffer.from(encoded, 'base64')
  let lineType = type
  let text: string | undefined
  switch (rng.int(9)) {
    case 0:
      blob = Buffer.from(blob)
      for (let i = rng.range(1, 4); i > 0; i--) blob[rng.int(blob.length)] = rng.int(256)
      break
    case 1:
      blob = blob.subarray(0, rng.int(blob.length))
      break
    case 2:
      blob = Buffer.concat([blob, rng.bytes(rng.range(1, 40))])
      break
    case 3:
      lineType = rng.pick(TYPES)
      break
    case 4:
      blob = randomBlob(rng)
      break
    case 5:
      text = `${type} ${encoded.slice(0, rng.int(encoded.length))}${rng.fromAlphabet(rng.range(0, 5), '=!*- ')}`
      break
    case 6:
      text = rng.unicode(rng.range(0, 80))
      break
    case 7:
      text = `${rng.pick(['', ' ', '\t', '\n'])}${base}${rng.pick(['', ' x', '\n', `\n${base}`, '\u0000'])}`
      break
    default:
      text = `${type} ${encoded} ${rng.unicode(rng.range(1, 30))}`
  }
  return text ?? `${lineType} ${blob.toString('base64')} ${comment}`
}

describe('the public-key parser', () => {
  test(`${PARSER_CASES} seeded inputs: a key or a 400 naming publicKey, nothing else`, async () => {
    const rng = new Rng(SEED)
    const accepted: { line: string; fingerprint: string }[] = []
    let refused = 0
    for (let n = 0; n < PARSER_CASES; n++) {
      const line = rng.chance(0.8)
        ? mutatedLine(rng)
        : `${rng.pick(TYPES)} ${randomBlob(rng).toString('base64')}`
      try {
        const { key } = parsePublicKeyLine(line, 'body/publicKey')
        // What was accepted parses again from its canonical form, as the same key.
        const again = parsePublicKeyLine(`${key.type} ${key.blob.toString('base64')}`, 'body/publicKey')
        assert.equal(again.key.fingerprint, key.fingerprint, `case ${n}: stable`)
        accepted.push({ line: `${key.type} ${key.blob.toString('base64')}`, fingerprint: key.fingerprint })
      } catch (error) {
        assert.ok(error instanceof AppError, `case ${n}: ${JSON.stringify(line)} threw ${String(error)}`)
        assert.equal(error.statusCode, 400, `case ${n}`)
        assert.equal(error.code, 'validation_failed', `case ${n}`)
        const fields = error.details?.['fields'] as { path: string }[]
        assert.equal(fields[0]!.path, 'body/publicKey', `case ${n}`)
        refused++
      }
    }
    assert.ok(refused > PARSER_CASES / 2, `${refused} refused`)
    assert.ok(accepted.length > 0, 'some mutants are still keys (a flipped byte of an Ed25519 key is one)')
    // Whatever the parser takes, OpenSSH takes as the same key.
    for (const [i, { line, fingerprint }] of accepted.slice(0, KEYGEN_SAMPLES).entries()) {
      const file = dir.file(`accepted-${i}.pub`, `${line}\n`)
      const listed = await sshKeygenResult(['-l', '-E', 'sha256', '-f', file])
      assert.equal(listed.code, 0, `${line}: ${listed.stderr}`)
      assert.equal(fingerprintOf(file), fingerprint)
    }
  })
})

describe('POST /ssh/certificates', () => {
  const junk = (rng: Rng): unknown =>
    rng.pick([
      () => null,
      () => rng.int(1_000_000) - 500_000,
      () => rng.next() * 1e12,
      () => rng.chance(0.5),
      () => rng.unicode(rng.range(0, 40)),
      () => 'x'.repeat(rng.pick([256, 4097, 9000])),
      () => [],
      () => ({}),
      () => [rng.unicode(3), 7],
      () => ({ __proto__: { polluted: true } }),
    ])()

  /** A valid body with one to three things broken (or, by chance, none that matter). */
  function body(rng: Rng): Record<string, unknown> {
    const out: Record<string, unknown> = {
      caId,
      publicKey: rng.pick(keys).publicLine,
      principals: ['alice'],
    }
    for (let i = rng.range(1, 3); i > 0; i--) {
      switch (rng.int(12)) {
        case 0:
          out['publicKey'] = mutatedLine(rng)
          break
        case 1:
          out[
            rng.pick([
              'caId',
              'publicKey',
              'principals',
              'keyId',
              'validitySeconds',
              'criticalOptions',
              'extensions',
            ])
          ] = junk(rng)
          break
        case 2:
          delete out[rng.pick(['caId', 'publicKey', 'principals'])]
          break
        case 3:
          out[rng.pick(['serial', 'nonce', 'type', 'validAfter', 'signatureKey'])] = junk(rng)
          break
        case 4:
          out['principals'] = Array.from({ length: rng.pick([0, 1, 3, 257]) }, () =>
            rng.chance(0.5) ? rng.unicode(rng.range(0, 6)) : rng.fromAlphabet(rng.range(1, 8), 'ab, \t*'),
          )
          break
        case 5:
          out['validitySeconds'] = rng.pick([0, 59, 60, 86_400, 86_401, -1, 1.5, 2 ** 53, 6_048_001])
          break
        case 6:
          out['criticalOptions'] = {
            [rng.pick(['forceCommand', 'sourceAddress', 'permit', 'force-command'])]: rng.chance(0.5)
              ? rng.fromAlphabet(rng.range(0, 30), '0123456789abcdef.:/,x ')
              : junk(rng),
          }
          break
        case 7:
          out['extensions'] = Array.from({ length: rng.range(0, 7) }, () =>
            rng.pick(['permit-pty', 'permit-user-rc', 'permit-everything', '', 'PERMIT-PTY']),
          )
          break
        case 8:
          out['keyId'] = rng.chance(0.5) ? rng.unicode(rng.range(0, 300)) : 'k'.repeat(rng.range(200, 300))
          break
        case 9:
          out['caId'] = rng.pick(['', 'not-a-uuid', `${caId}x`, caId.toUpperCase().replace(/-/g, '')])
          break
        case 10:
          out['publicKey'] = `${rng.pick(TYPES)} ${randomBlob(rng).toString('base64')}`
          break
        default:
          out['publicKey'] = 'A'.repeat(rng.pick([8193, 20_000]))
      }
    }
    return out
  }

  test(`${ROUTE_CASES} seeded bodies: 400 naming a field (or 201 for one still valid), never anything else`, async () => {
    const rng = new Rng(SEED ^ 0x5eed)
    const cases = Array.from({ length: ROUTE_CASES }, (_, n) => ({ n, body: body(rng) }))
    // A few that are not JSON objects at all.
    const raw = ['', '{', 'null', '[]', '"ssh-ed25519 AAAA"', '{"caId":', '\u0000']
    const statuses = new Map<number, number>()
    let created = 0
    await mapConcurrently(cases, 8, async ({ n, body }) => {
      const res = await svc.request('POST', '/api/v1/ssh/certificates', { key: tenant.key, body })
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
      if (res.status === 201) {
        created++
        return
      }
      assert.equal(
        res.status,
        400,
        `case ${n}: ${JSON.stringify(body).slice(0, 300)} → ${res.status} ${res.text}`,
      )
      assert.match(res.body?.error ?? '', /^[a-z_]+$/, `case ${n}: ${res.text}`)
      assert.equal(typeof res.body.message, 'string', `case ${n}`)
      if (res.body.error === 'validation_failed')
        assert.match(res.body.fields?.[0]?.path ?? '', /^body/, `case ${n}: names a field: ${res.text}`)
    })
    for (const text of raw) {
      const res = await svc.request('POST', '/api/v1/ssh/certificates', {
        key: tenant.key,
        rawBody: text,
        headers: { 'content-type': 'application/json' },
      })
      assert.equal(res.status, 400, `${JSON.stringify(text)}: ${res.text}`)
    }
    assert.ok((statuses.get(400) ?? 0) > ROUTE_CASES / 2, JSON.stringify([...statuses]))
    // Only the accepted requests stored a certificate; the service still answers.
    const [row] = await svc.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM ssh_certificates WHERE tenant_id = ${tenant.tenantId}`
    assert.equal(row!.n, created)
    const health = await svc.request('GET', '/api/v1/health')
    assert.equal(health.status, 200)
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
  })
})
