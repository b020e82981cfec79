import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { uniqueName } from '../helpers/api-client.ts'
import { manualClock } from '../helpers/manual-clock.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'
import {
  blobOfLine,
  fingerprintOf,
  type KeyPair,
  keygen,
  listCertificate,
  readCertificate,
  signatureVerifies,
  sshKeygenResult,
  type TempDir,
  tempDir,
  validText,
} from './ssh-tools.ts'

/**
 * The SSH certificate authority (docs/ssh.md) over real HTTP on the real PostgreSQL: CAs on every
 * algorithm OpenSSH certifies with, certificates for every key type read back by ssh-keygen
 * (which verifies the CA's signature) and by node:crypto, the rules of a request (each refusal a
 * 400 naming the field), validity defaults and bounds, the pinned key version, revocation and the
 * KRL as ssh-keygen reads it, the audit records that meter issuance and revocation, tenant
 * isolation, scopes, and API keys restricted to other keys. Logins with a real sshd are in
 * sshd-login.test.ts.
 */

const HOUR = 3600
const DAY = 24 * HOUR
/** The service's time stands still (whole seconds), so validity is compared exactly. */
const clock = manualClock(new Date(Math.floor(Date.now() / 1000) * 1000))

let svc: TestService
let dir: TempDir
/** One key pair per type a certificate may be issued for. */
const subjects: Record<string, KeyPair> = {}
const SUBJECT_TYPES: [string, string, number | undefined, string][] = [
  ['ed25519', 'ed25519', undefined, 'ssh-ed25519-cert-v01@openssh.com'],
  ['ecdsa-256', 'ecdsa', 256, 'ecdsa-sha2-nistp256-cert-v01@openssh.com'],
  ['ecdsa-384', 'ecdsa', 384, 'ecdsa-sha2-nistp384-cert-v01@openssh.com'],
  ['ecdsa-521', 'ecdsa', 521, 'ecdsa-sha2-nistp521-cert-v01@openssh.com'],
  ['rsa-2048', 'rsa', 2048, 'ssh-rsa-cert-v01@openssh.com'],
]

before(async () => {
  svc = await startTestService({}, { clock })
  dir = tempDir('kms-ssh-certificates-')
  for (const [name, type, bits] of SUBJECT_TYPES) subjects[name] = keygen(dir, name, type, bits)
})
after(async () => {
  await svc?.stop()
  dir?.remove()
})

interface Ca {
  id: string
  type: 'user' | 'host'
  keyId: string
  keyVersion: number
  algorithm: string
  signatureAlgorithm: string
  publicKey: string
  fingerprint: string
  authorizedKeysLine: string | null
  knownHostsLine: string | null
  defaultValiditySeconds: number
  maxValiditySeconds: number
  publicKeyUrl: string
  krlUrl: string
}

interface Certificate {
  id: string
  caId: string
  type: string
  serial: string
  keyId: string
  principals: string[]
  validAfter: string
  validBefore: string
  publicKeyType: string
  publicKeyFingerprint: string
  criticalOptions: { forceCommand?: string; sourceAddress?: string }
  extensions: string[]
  certificate: string
  status: string
  revokedAt: string | null
  revocationReason: string | null
}

type Who = TenantWithKey | string
const keyOf = (who: Who) => (typeof who === 'string' ? who : who.key)

function call(method: string, path: string, who: Who, body?: unknown): Promise<HttpResult> {
  return svc.request(method, `/api/v1${path}`, { key: keyOf(who), ...(body === undefined ? {} : { body }) })
}

async function createCa(who: Who, body: Record<string, unknown>): Promise<Ca> {
  const res = await call('POST', '/ssh/ca', who, body)
  assert.equal(res.status, 201, res.text)
  return res.body as Ca
}

async function issue(who: Who, body: Record<string, unknown>): Promise<Certificate> {
  const res = await call('POST', '/ssh/certificates', who, body)
  assert.equal(res.status, 201, res.text)
  return res.body as Certificate
}

/** Writes the certificate next to nothing in particular and lists it with ssh-keygen -L. */
function listed(certificate: Certificate) {
  return listCertificate(dir.file(`${certificate.id}-cert.pub`, `${certificate.certificate}\n`))
}

function expectInvalid(res: HttpResult, path: string, fragment: string | RegExp, what: string): void {
  assert.equal(res.status, 400, `${what}: ${res.text}`)
  assert.equal(res.body.error, 'validation_failed', `${what}: ${res.text}`)
  const field = res.body.fields?.[0]
  assert.equal(field?.path, path, `${what}: ${res.text}`)
  if (typeof fragment === 'string') assert.ok(field.message.includes(fragment), `${what}: ${field.message}`)
  else assert.match(field.message, fragment, what)
}

function expectError(res: HttpResult, status: number, code: string, what: string): void {
  assert.equal(res.status, status, `${what}: ${res.text}`)
  assert.equal(res.body?.error, code, `${what}: ${res.text}`)
}

async function auditRecords(tenantId: string, action: string) {
  return svc.sql<
    {
      actor: string
      resource: string | null
      key_version: number | null
      outcome: string
      details: Record<string, unknown> | null
    }[]
  >`SELECT actor, resource, key_version, outcome, details FROM audit_log
    WHERE tenant_id = ${tenantId} AND action = ${action} ORDER BY id`
}

async function restrictedApiKey(owner: TenantWithKey, body: Record<string, unknown>): Promise<string> {
  const res = await call('POST', '/api-keys', owner, { name: uniqueName('restricted'), ...body })
  assert.equal(res.status, 201, res.text)
  return res.body.key as string
}

const CA_ALGORITHMS: [string, string, string][] = [
  ['Ed25519', 'ssh-ed25519', 'ED25519'],
  ['EC-P256', 'ecdsa-sha2-nistp256', 'ECDSA'],
  ['EC-P384', 'ecdsa-sha2-nistp384', 'ECDSA'],
  ['EC-P521', 'ecdsa-sha2-nistp521', 'ECDSA'],
  ['RSA-3072', 'rsa-sha2-256', 'RSA'],
]

describe('user CAs on every algorithm sign every key type', () => {
  for (const [algorithm, signatureAlgorithm, caKeyName] of CA_ALGORITHMS) {
    test(`${algorithm}: ssh-keygen -L reads and verifies each certificate, and node:crypto verifies its signature`, async () => {
      const tenant = await svc.createTenant()
      const ca = await createCa(tenant, { type: 'user', algorithm })
      assert.equal(ca.algorithm, algorithm)
      assert.equal(ca.signatureAlgorithm, signatureAlgorithm)
      assert.equal(ca.authorizedKeysLine, `cert-authority ${ca.publicKey.split(' ').slice(0, 2).join(' ')}`)
      assert.equal(ca.knownHostsLine, null)
      // The fingerprint is ssh-keygen's of the CA's public key line.
      assert.equal(ca.fingerprint, fingerprintOf(dir.file(`${ca.id}.pub`, `${ca.publicKey}\n`)))

      for (const [name, , , certType] of SUBJECT_TYPES) {
        const subject = subjects[name]!
        const certificate = await issue(tenant, {
          caId: ca.id,
          publicKey: subject.publicLine,
          principals: ['alice', 'deploy'],
          keyId: `alice-${name}`,
        })
        const listing = listed(certificate)
        assert.equal(listing.type, `${certType} user certificate`, name)
        assert.equal(
          listing.publicKey.split(' ')[1],
          subject.fingerprint,
          `${name}: the subject key is the one sent`,
        )
        assert.equal(listing.signingCa, `${caKeyName} ${ca.fingerprint} (using ${signatureAlgorithm})`, name)
        assert.equal(listing.keyId, `alice-${name}`)
        assert.equal(listing.serial, certificate.serial)
        assert.deepEqual(listing.principals, ['alice', 'deploy'])
        assert.deepEqual(listing.extensions, ['permit-pty'], 'a user certificate permits a pty by default')
        assert.deepEqual(listing.criticalOptions, [])

        const read = readCertificate(certificate.certificate)
        assert.ok(signatureVerifies(read, blobOfLine(ca.publicKey)), `${name}: the signature verifies`)
        assert.deepEqual(read.signatureKey, blobOfLine(ca.publicKey), 'the signature key is the CA’s')
        assert.equal(read.nonce.length, 32, 'a 32-byte nonce')
        assert.equal(read.kind, 1, 'SSH_CERT_TYPE_USER')
        assert.equal(read.serial.toString(), certificate.serial)
        assert.ok(read.serial > 0n)
        assert.equal(certificate.publicKeyFingerprint, subject.fingerprint)
      }
    })
  }

  test('the CA key is a non-exportable Signing key reserved for SSH, labelled as the CA’s', async () => {
    const tenant = await svc.createTenant()
    const ca = await createCa(tenant, { type: 'user' })
    assert.equal(ca.algorithm, 'Ed25519', 'Ed25519 by default')
    const key = await call('GET', `/keys/${ca.keyId}`, tenant)
    assert.equal(key.status, 200, key.text)
    assert.equal(key.body.keyType, 'Signing')
    assert.equal(key.body.exportable, false)
    assert.equal(key.body.reservedFor, 'ssh')
    assert.ok(key.body.name.startsWith('ssh-user-ca-'), key.body.name)
    assert.ok(key.body.labels.includes('ssh-user-ca'), JSON.stringify(key.body.labels))
    // Nobody signs a hand-made certificate with it through /sign.
    const signed = await call('POST', '/sign', tenant, {
      keyId: ca.keyId,
      message: Buffer.from('a forged certificate').toString('base64'),
    })
    expectError(signed, 409, 'key_reserved', 'the CA key through /sign')
  })

  test('a certificate carries the critical options and extensions asked for, in the order OpenSSH wants', async () => {
    const tenant = await svc.createTenant()
    const ca = await createCa(tenant, { type: 'user', algorithm: 'EC-P256' })
    const certificate = await issue(tenant, {
      caId: ca.id,
      publicKey: subjects['ed25519']!.publicLine,
      principals: ['ops'],
      criticalOptions: { forceCommand: '/usr/bin/backup --daily', sourceAddress: '10.0.0.0/8,2001:db8::/32' },
      extensions: ['permit-user-rc', 'permit-X11-forwarding', 'permit-port-forwarding'],
    })
    const listing = listed(certificate)
    assert.deepEqual(listing.criticalOptions, [
      'force-command /usr/bin/backup --daily',
      'source-address 10.0.0.0/8,2001:db8::/32',
    ])
    assert.deepEqual(listing.extensions, [
      'permit-X11-forwarding',
      'permit-port-forwarding',
      'permit-user-rc',
    ])
    assert.deepEqual(certificate.criticalOptions, {
      forceCommand: '/usr/bin/backup --daily',
      sourceAddress: '10.0.0.0/8,2001:db8::/32',
    })
    assert.deepEqual(certificate.extensions, [
      'permit-X11-forwarding',
      'permit-port-forwarding',
      'permit-user-rc',
    ])
    const none = await issue(tenant, {
      caId: ca.id,
      publicKey: subjects['ed25519']!.publicLine,
      principals: ['ops'],
      extensions: [],
    })
    assert.deepEqual(listed(none).extensions, [], 'an empty list asks for no extension at all')
  })

  test('the key ID defaults to the certificate’s id, and serials differ', async () => {
    const tenant = await svc.createTenant()
    const ca = await createCa(tenant, { type: 'user' })
    const serials = new Set<string>()
    for (let i = 0; i < 5; i++) {
      const certificate = await issue(tenant, {
        caId: ca.id,
        publicKey: subjects['ed25519']!.publicLine,
        principals: ['alice'],
      })
      assert.equal(listed(certificate).keyId, certificate.id)
      serials.add(certificate.serial)
    }
    assert.equal(serials.size, 5)
  })
})

describe('host CAs', () => {
  let tenant: TenantWithKey
  let ca: Ca
  before(async () => {
    tenant = await svc.createTenant()
    ca = await createCa(tenant, { type: 'host', algorithm: 'EC-P384' })
  })

  test('the view gives the known_hosts line; a host certificate has no extensions', async () => {
    assert.equal(ca.knownHostsLine, `@cert-authority * ${ca.publicKey.split(' ').slice(0, 2).join(' ')}`)
    assert.equal(ca.authorizedKeysLine, null)
    assert.equal(ca.defaultValiditySeconds, 30 * DAY)
    assert.equal(ca.maxValiditySeconds, 70 * DAY)
    const certificate = await issue(tenant, {
      caId: ca.id,
      publicKey: subjects['ecdsa-256']!.publicLine,
      principals: ['db1.example.com', '10.0.0.5'],
    })
    const listing = listed(certificate)
    assert.equal(listing.type, 'ecdsa-sha2-nistp256-cert-v01@openssh.com host certificate')
    assert.deepEqual(listing.principals, ['db1.example.com', '10.0.0.5'])
    assert.deepEqual(listing.extensions, [])
    assert.deepEqual(listing.criticalOptions, [])
    assert.equal(readCertificate(certificate.certificate).kind, 2, 'SSH_CERT_TYPE_HOST')
    const now = clock.now()
    assert.equal(
      listing.valid,
      validText(new Date(now.getTime() - 300_000), new Date(now.getTime() + 30 * DAY * 1000)),
    )
  })

  test('host certificates refuse critical options and extensions, naming them', async () => {
    const base = { caId: ca.id, publicKey: subjects['ed25519']!.publicLine, principals: ['web1'] }
    expectInvalid(
      await call('POST', '/ssh/certificates', tenant, { ...base, extensions: ['permit-pty'] }),
      'body/extensions',
      'host certificate',
      'extensions on a host certificate',
    )
    expectInvalid(
      await call('POST', '/ssh/certificates', tenant, { ...base, criticalOptions: { forceCommand: 'true' } }),
      'body/criticalOptions',
      'host certificate',
      'critical options on a host certificate',
    )
  })

  test('a tenant has one CA of each type: a second is 409', async () => {
    expectError(
      await call('POST', '/ssh/ca', tenant, { type: 'host' }),
      409,
      'ssh_ca_exists',
      'a second host CA',
    )
    const user = await createCa(tenant, { type: 'user' })
    const list = await call('GET', '/ssh/ca', tenant)
    assert.equal(list.status, 200, list.text)
    assert.deepEqual(list.body.data.map((c: Ca) => c.id).sort(), [ca.id, user.id].sort())
  })
})

describe('validity', () => {
  let tenant: TenantWithKey
  let ca: Ca
  before(async () => {
    tenant = await svc.createTenant()
    ca = await createCa(tenant, { type: 'user' })
  })
  const base = () => ({ caId: ca.id, publicKey: subjects['ed25519']!.publicLine, principals: ['alice'] })

  test('a user certificate lasts 16 hours by default and starts 5 minutes early', async () => {
    assert.equal(ca.defaultValiditySeconds, 16 * HOUR)
    assert.equal(ca.maxValiditySeconds, 24 * HOUR)
    const now = clock.now()
    const certificate = await issue(tenant, base())
    const after = new Date(now.getTime() - 300_000)
    const before = new Date(now.getTime() + 16 * HOUR * 1000)
    assert.equal(certificate.validAfter, after.toISOString())
    assert.equal(certificate.validBefore, before.toISOString())
    assert.equal(listed(certificate).valid, validText(after, before))
  })

  test('a request asks for less or up to the CA’s maximum; beyond it is a 400 naming validitySeconds', async () => {
    const now = clock.now()
    const short = await issue(tenant, { ...base(), validitySeconds: 600 })
    assert.equal(short.validBefore, new Date(now.getTime() + 600_000).toISOString())
    await issue(tenant, { ...base(), validitySeconds: 24 * HOUR })
    expectInvalid(
      await call('POST', '/ssh/certificates', tenant, { ...base(), validitySeconds: 24 * HOUR + 1 }),
      'body/validitySeconds',
      'at most 86400',
      'a day and a second',
    )
    expectInvalid(
      await call('POST', '/ssh/certificates', tenant, { ...base(), validitySeconds: 59 }),
      'body/validitySeconds',
      '60',
      'under a minute',
    )
  })

  test('PATCH changes a CA’s default and maximum within its type’s bound', async () => {
    const patched = await call('PATCH', `/ssh/ca/${ca.id}`, tenant, {
      defaultValiditySeconds: 2 * HOUR,
      maxValiditySeconds: 4 * HOUR,
    })
    assert.equal(patched.status, 200, patched.text)
    assert.equal(patched.body.defaultValiditySeconds, 2 * HOUR)
    assert.equal(patched.body.maxValiditySeconds, 4 * HOUR)
    const now = clock.now()
    const certificate = await issue(tenant, base())
    assert.equal(certificate.validBefore, new Date(now.getTime() + 2 * HOUR * 1000).toISOString())
    expectInvalid(
      await call('POST', '/ssh/certificates', tenant, { ...base(), validitySeconds: 5 * HOUR }),
      'body/validitySeconds',
      'at most 14400',
      'past the new maximum',
    )
    expectInvalid(
      await call('PATCH', `/ssh/ca/${ca.id}`, tenant, { maxValiditySeconds: 25 * HOUR }),
      'body/maxValiditySeconds',
      'at most 86400',
      'a user CA over a day',
    )
    expectInvalid(
      await call('PATCH', `/ssh/ca/${ca.id}`, tenant, { maxValiditySeconds: HOUR }),
      'body/defaultValiditySeconds',
      'at most',
      'a maximum under the default',
    )
    const records = await auditRecords(tenant.tenantId, 'ssh.ca_update')
    assert.equal(records.length, 1)
    assert.equal(records[0]!.resource, `ssh-ca:${ca.id}`)
    assert.deepEqual(records[0]!.details, { defaultValiditySeconds: 2 * HOUR, maxValiditySeconds: 4 * HOUR })
  })

  test('CA creation takes its own bounds: a host CA up to 70 days, a user CA not past a day', async () => {
    const other = await svc.createTenant()
    expectInvalid(
      await call('POST', '/ssh/ca', other, { type: 'user', maxValiditySeconds: 2 * DAY }),
      'body/maxValiditySeconds',
      'at most 86400',
      'a two-day user CA',
    )
    const host = await createCa(other, {
      type: 'host',
      maxValiditySeconds: 70 * DAY,
      defaultValiditySeconds: 7 * DAY,
    })
    assert.equal(host.defaultValiditySeconds, 7 * DAY)
    const now = clock.now()
    const certificate = await issue(other, {
      caId: host.id,
      publicKey: subjects['ed25519']!.publicLine,
      principals: ['h'],
      validitySeconds: 70 * DAY,
    })
    assert.equal(certificate.validBefore, new Date(now.getTime() + 70 * DAY * 1000).toISOString())
  })
})

describe('requests the service refuses, each a 400 naming the field and the rule', () => {
  let tenant: TenantWithKey
  let ca: Ca
  before(async () => {
    tenant = await svc.createTenant()
    ca = await createCa(tenant, { type: 'user' })
  })
  const attempt = (body: Record<string, unknown>) =>
    call('POST', '/ssh/certificates', tenant, {
      caId: ca.id,
      publicKey: subjects['ed25519']!.publicLine,
      principals: ['alice'],
      ...body,
    })

  test('public keys: certificates, DSA, security keys, short RSA, other types and broken encodings', async () => {
    const certificate = await issue(tenant, {
      caId: ca.id,
      publicKey: subjects['ed25519']!.publicLine,
      principals: ['a'],
    })
    const ed25519 = subjects['ed25519']!.publicLine.split(' ')[1]!
    const rsa1024 = keygen(dir, 'rsa-1024', 'rsa', 1024).publicLine
    const skKey =
      'sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAIEX/dQ0v4127bEo8eeG1EV0ApO2lWbSnN6RWusn/NjqIAAAABHNzaDo= yubikey'
    const cases: [string, string | RegExp, string][] = [
      [certificate.certificate, 'is a certificate', 'a certificate'],
      [
        'ssh-dss AAAAB3NzaC1kc3MAAACBAP1/U4EddRIpUt9KnC7s5Of2EbdSPO9EAMMeP4C2USZpRV1AIlH7WT2NWPq/xfW6MPbLm1Vs14E7 x',
        'DSA',
        'DSA',
      ],
      [skKey, 'security-key', 'a FIDO security key'],
      [rsa1024, 'RSA modulus of 1024 bits, under 2048', 'RSA-1024'],
      ['ssh-ed448 AAAA', 'key type', 'an unknown type'],
      ['ssh-ed25519', 'Base64', 'no key'],
      ['ssh-ed25519 !!!!', 'Base64', 'not Base64'],
      [`ssh-ed25519 ${ed25519.slice(0, 40)}`, 'Base64', 'truncated Base64'],
      [`ecdsa-sha2-nistp256 ${ed25519}`, 'another type', 'a blob of another type than the line'],
      [
        `ssh-ed25519 ${Buffer.concat([Buffer.from(ed25519, 'base64'), Buffer.of(0, 0, 0, 0)]).toString('base64')}`,
        'after its last field',
        'trailing bytes',
      ],
      [
        `ssh-ed25519 ${Buffer.from(ed25519, 'base64').subarray(0, 40).toString('base64')}`,
        'truncated',
        'a short blob',
      ],
      [`from="10.0.0.1" ${subjects['ed25519']!.publicLine}`, 'key type', 'authorized_keys options'],
    ]
    for (const [publicKey, fragment, what] of cases) {
      const res = await attempt({ publicKey })
      expectInvalid(res, 'body/publicKey', fragment, what)
      assert.ok(
        res.body.fields[0].message.includes('ssh-ed25519, ecdsa-sha2-nistp256'),
        `${what}: names the allowed types`,
      )
      assert.deepEqual(res.body.allowedKeyTypes, [
        'ssh-ed25519',
        'ecdsa-sha2-nistp256',
        'ecdsa-sha2-nistp384',
        'ecdsa-sha2-nistp521',
        'ssh-rsa',
      ])
    }
    // An EC point off its curve.
    const point = Buffer.alloc(65, 7)
    point[0] = 4
    const name = Buffer.from('ecdsa-sha2-nistp256')
    const curve = Buffer.from('nistp256')
    const len = (n: number) => {
      const b = Buffer.alloc(4)
      b.writeUInt32BE(n)
      return b
    }
    const offCurve = Buffer.concat([
      len(name.length),
      name,
      len(curve.length),
      curve,
      len(point.length),
      point,
    ])
    expectInvalid(
      await attempt({ publicKey: `ecdsa-sha2-nistp256 ${offCurve.toString('base64')}` }),
      'body/publicKey',
      'node:crypto refuses',
      'a point off the curve',
    )
  })

  test('principals: none, commas, whitespace, control characters, repeats, too many, too long', async () => {
    expectInvalid(await attempt({ principals: [] }), 'body/principals', 'any user or host', 'no principal')
    expectInvalid(await attempt({ principals: ['a,b'] }), 'body/principals/0', 'commas', 'a comma')
    expectInvalid(await attempt({ principals: ['ok', 'a b'] }), 'body/principals/1', 'whitespace', 'a space')
    expectInvalid(
      await attempt({ principals: ['a\u0007'] }),
      'body/principals/0',
      'control',
      'a control character',
    )
    expectInvalid(
      await attempt({ principals: ['alice', 'alice'] }),
      'body/principals/1',
      'repeats',
      'a repeat',
    )
    expectInvalid(
      await attempt({ principals: Array.from({ length: 257 }, (_, i) => `p${i}`) }),
      'body/principals',
      '256',
      '257 principals',
    )
    expectInvalid(
      await attempt({ principals: ['x'.repeat(256)] }),
      'body/principals/0',
      '255',
      'a 256-character principal',
    )
    await issue(tenant, {
      caId: ca.id,
      publicKey: subjects['ed25519']!.publicLine,
      principals: Array.from({ length: 256 }, (_, i) => `p${i}`),
    })
  })

  test('key ID, critical options and extensions', async () => {
    expectInvalid(await attempt({ keyId: 'k'.repeat(256) }), 'body/keyId', '255', 'a 256-character key ID')
    expectInvalid(await attempt({ keyId: 'line\nbreak' }), 'body/keyId', 'control', 'a key ID with a newline')
    expectInvalid(
      await attempt({ criticalOptions: { sourceAddress: '10.1.2.3/8' } }),
      'body/criticalOptions/sourceAddress',
      'bits set past its prefix',
      'host bits in a CIDR',
    )
    expectInvalid(
      await attempt({ criticalOptions: { sourceAddress: '10.0.0.0/33' } }),
      'body/criticalOptions/sourceAddress',
      'prefix longer than 32',
      'a /33',
    )
    expectInvalid(
      await attempt({ criticalOptions: { sourceAddress: 'example.com' } }),
      'body/criticalOptions/sourceAddress',
      'CIDR',
      'a host name',
    )
    expectInvalid(
      await attempt({ criticalOptions: { sourceAddress: '1.2.3.4,,5.6.7.8' } }),
      'body/criticalOptions/sourceAddress',
      'entry 2',
      'an empty entry',
    )
    expectInvalid(
      await attempt({ criticalOptions: { permitAll: true } }),
      'body/criticalOptions/permitAll',
      'not an allowed field',
      'an unknown critical option',
    )
    expectInvalid(
      await attempt({ extensions: ['permit-everything'] }),
      'body/extensions/0',
      'permit-pty',
      'an unknown extension',
    )
    expectInvalid(
      await attempt({ extensions: ['permit-pty', 'permit-pty'] }),
      'body/extensions',
      'duplicate',
      'a repeated extension',
    )
  })

  test('refusals are audited as failures of the issuance, against the CA key once it is known', async () => {
    const before = (await auditRecords(tenant.tenantId, 'crypto.ssh_certificate_issue')).length
    // Refused before the CA is read (the key line), then after (the CA's validity bound).
    expectInvalid(await attempt({ publicKey: 'ssh-dss AAAA' }), 'body/publicKey', 'DSA', 'DSA')
    expectInvalid(await attempt({ validitySeconds: 86_401 }), 'body/validitySeconds', '86400', 'too long')
    const records = (await auditRecords(tenant.tenantId, 'crypto.ssh_certificate_issue')).slice(before)
    assert.deepEqual(
      records.map((r) => [r.outcome, r.resource, r.details?.['error']]),
      [
        ['failure', null, 'validation_failed'],
        ['failure', `key:${ca.keyId}`, 'validation_failed'],
      ],
    )
  })
})

describe('CA keys given by the caller', () => {
  test('an existing non-exportable key becomes the CA key, reserved for SSH, its current version pinned', async () => {
    const tenant = await svc.createTenant()
    const key = await call('POST', '/keys', tenant, {
      name: uniqueName('mine'),
      keyType: 'Signing',
      algorithm: 'EC-P521',
    })
    assert.equal(key.status, 201, key.text)
    // Rotated once before it becomes a CA key: version 2 is the one the CA pins.
    const rotated = await call('POST', `/keys/${key.body.id}/rotate`, tenant)
    assert.equal(rotated.status, 200, rotated.text)
    const ca = await createCa(tenant, { type: 'user', keyId: key.body.id })
    assert.equal(ca.keyId, key.body.id)
    assert.equal(ca.keyVersion, 2)
    assert.equal(ca.algorithm, 'EC-P521')
    // The CA's key is version 2's public key, as the keys domain exports it.
    const jwk = await call('GET', `/keys/${key.body.id}/public?format=JWK&version=2`, tenant)
    assert.equal(jwk.status, 200, jwk.text)
    const point = blobOfLine(ca.publicKey).subarray(-133)
    assert.deepEqual(point.subarray(1, 67), Buffer.from(jwk.body.x, 'base64url'))
    assert.deepEqual(point.subarray(67), Buffer.from(jwk.body.y, 'base64url'))
    const reserved = await call('GET', `/keys/${key.body.id}`, tenant)
    assert.equal(reserved.body.reservedFor, 'ssh')
    // From now on the key's versions are the CA's: no rotation, no /sign.
    expectError(
      await call('POST', `/keys/${key.body.id}/rotate`, tenant),
      409,
      'key_reserved',
      'rotating a CA key',
    )
    const certificate = await issue(tenant, {
      caId: ca.id,
      publicKey: subjects['ed25519']!.publicLine,
      principals: ['a'],
    })
    assert.equal(listed(certificate).signingCa, `ECDSA ${ca.fingerprint} (using ecdsa-sha2-nistp521)`)
    assert.ok(signatureVerifies(readCertificate(certificate.certificate), blobOfLine(ca.publicKey)))
    const records = await auditRecords(tenant.tenantId, 'crypto.ssh_certificate_issue')
    assert.equal(records.at(-1)!.key_version, 2)
    // The other CA cannot take the same key.
    expectError(
      await call('POST', '/ssh/ca', tenant, { type: 'host', keyId: key.body.id }),
      409,
      'key_reserved',
      'a key already reserved',
    )
  })

  test('keys that cannot be CA keys are refused naming keyId; another tenant’s key is 404', async () => {
    const tenant = await svc.createTenant()
    const make = async (body: Record<string, unknown>) => {
      const res = await call('POST', '/keys', tenant, { name: uniqueName('k'), ...body })
      assert.equal(res.status, 201, res.text)
      return res.body.id as string
    }
    const exportable = await make({ keyType: 'Signing', algorithm: 'Ed25519', exportable: true })
    const mlDsa = await make({ keyType: 'Signing', algorithm: 'ML-DSA-65' })
    const encryption = await make({ keyType: 'Encryption', algorithm: 'ML-KEM-768' })
    const ed25519 = await make({ keyType: 'Signing', algorithm: 'Ed25519' })
    expectInvalid(
      await call('POST', '/ssh/ca', tenant, { type: 'user', keyId: exportable }),
      'body/keyId',
      'an exportable key',
      'exportable',
    )
    expectInvalid(
      await call('POST', '/ssh/ca', tenant, { type: 'user', keyId: mlDsa }),
      'body/keyId',
      'it is a ML-DSA-65 key',
      'ML-DSA',
    )
    expectInvalid(
      await call('POST', '/ssh/ca', tenant, { type: 'user', keyId: encryption }),
      'body/keyId',
      'Signing key',
      'an encryption key',
    )
    expectInvalid(
      await call('POST', '/ssh/ca', tenant, { type: 'user', keyId: ed25519, algorithm: 'Ed25519' }),
      'body/algorithm',
      'omitted with keyId',
      'keyId and algorithm',
    )
    const other = await svc.createTenant()
    expectError(
      await call('POST', '/ssh/ca', other, { type: 'user', keyId: ed25519 }),
      404,
      'key_not_found',
      'another tenant’s key',
    )
    expectError(
      await call('POST', '/ssh/ca', tenant, { type: 'user', keyId: randomUUID() }),
      404,
      'key_not_found',
      'no such key',
    )
    // None of the refusals made a CA or reserved a key.
    const list = await call('GET', '/ssh/ca', tenant)
    assert.deepEqual(list.body.data, [])
    assert.equal((await call('GET', `/keys/${ed25519}`, tenant)).body.reservedFor, null)
  })

  test('CA creation is audited as ssh.ca_create', async () => {
    const tenant = await svc.createTenant()
    const ca = await createCa(tenant, { type: 'host' })
    const records = await auditRecords(tenant.tenantId, 'ssh.ca_create')
    assert.equal(records.length, 1)
    assert.equal(records[0]!.resource, `ssh-ca:${ca.id}`)
    assert.equal(records[0]!.outcome, 'success')
    assert.deepEqual(records[0]!.details, {
      type: 'host',
      keyId: ca.keyId,
      keyVersion: 1,
      algorithm: 'Ed25519',
      generatedKey: true,
    })
  })
})

describe('listing, revocation and the KRL', () => {
  let tenant: TenantWithKey
  let user: Ca
  let host: Ca
  const issued: Certificate[] = []
  before(async () => {
    tenant = await svc.createTenant()
    user = await createCa(tenant, { type: 'user' })
    host = await createCa(tenant, { type: 'host' })
    for (let i = 0; i < 3; i++)
      issued.push(
        await issue(tenant, {
          caId: user.id,
          publicKey: subjects['ed25519']!.publicLine,
          principals: [`u${i}`],
          validitySeconds: (i + 1) * HOUR,
        }),
      )
    issued.push(
      await issue(tenant, {
        caId: host.id,
        publicKey: subjects['ecdsa-256']!.publicLine,
        principals: ['h1'],
      }),
    )
  })

  test('list and get: newest first, filtered by CA type, revocation and expiry', async () => {
    const all = await call('GET', '/ssh/certificates', tenant)
    assert.equal(all.status, 200, all.text)
    assert.equal(all.body.total, 4)
    const one = await call('GET', `/ssh/certificates/${issued[0]!.id}`, tenant)
    assert.equal(one.status, 200, one.text)
    assert.deepEqual(one.body, issued[0])
    const hosts = await call('GET', '/ssh/certificates?caType=host', tenant)
    assert.deepEqual(
      hosts.body.data.map((c: Certificate) => c.id),
      [issued[3]!.id],
    )
    const soon = await call('GET', '/ssh/certificates?expiringWithinHours=2', tenant)
    assert.deepEqual(
      soon.body.data.map((c: Certificate) => c.id).sort(),
      [issued[0]!.id, issued[1]!.id].sort(),
    )
    const page = await call('GET', '/ssh/certificates?limit=1&offset=1', tenant)
    assert.equal(page.body.data.length, 1)
    assert.equal(page.body.total, 4)
  })

  test('revocation: audited against the CA key, 409 the second time, listed in the KRL', async () => {
    const target = issued[0]!
    const revoked = await call('POST', `/ssh/certificates/${target.id}/revoke`, tenant, {
      reason: 'laptop lost',
    })
    assert.equal(revoked.status, 200, revoked.text)
    assert.equal(revoked.body.status, 'revoked')
    assert.equal(revoked.body.revocationReason, 'laptop lost')
    assert.equal(revoked.body.revokedAt, clock.now().toISOString())
    expectError(
      await call('POST', `/ssh/certificates/${target.id}/revoke`, tenant, {}),
      409,
      'ssh_certificate_revoked',
      'twice',
    )

    const records = await auditRecords(tenant.tenantId, 'crypto.ssh_certificate_revoke')
    const success = records.filter((r) => r.outcome === 'success')
    assert.equal(success.length, 1)
    assert.equal(success[0]!.resource, `key:${user.keyId}`)
    assert.equal(success[0]!.key_version, 1)
    assert.deepEqual(success[0]!.details, {
      caId: user.id,
      certificateId: target.id,
      serial: target.serial,
      certType: 'user',
    })
    const issues = (await auditRecords(tenant.tenantId, 'crypto.ssh_certificate_issue')).filter(
      (r) => r.outcome === 'success',
    )
    assert.equal(issues.length, 4, 'one record per certificate issued')
    assert.deepEqual(
      issues.map((r) => r.resource).sort(),
      [...Array(3).fill(`key:${user.keyId}`), `key:${host.keyId}`].sort(),
    )

    const listedRevoked = await call('GET', '/ssh/certificates?revoked=true', tenant)
    assert.deepEqual(
      listedRevoked.body.data.map((c: Certificate) => c.id),
      [target.id],
    )
    const unrevoked = await call('GET', '/ssh/certificates?revoked=false', tenant)
    assert.equal(unrevoked.body.total, 3)

    // The KRL is public (no credential), bytes that ssh-keygen reads.
    const response = await fetch(new URL(user.krlUrl, svc.baseUrl))
    assert.equal(response.status, 200)
    assert.equal(response.headers.get('content-type'), 'application/octet-stream')
    const krl = dir.file(`${user.id}.krl`, Buffer.from(await response.arrayBuffer()))
    const listing = await sshKeygenResult(['-Q', '-l', '-f', krl])
    assert.equal(listing.code, 0, listing.stderr)
    assert.match(listing.stdout, new RegExp(`serial: ${target.serial}\\b`))
    assert.match(
      listing.stdout,
      new RegExp(`CA key ssh-ed25519 ${user.fingerprint.replace(/[+/]/g, '\\$&')}`),
    )
    const revokedCheck = await sshKeygenResult([
      '-Q',
      '-f',
      krl,
      dir.file('revoked-cert.pub', `${target.certificate}\n`),
    ])
    assert.notEqual(revokedCheck.code, 0, 'ssh-keygen -Q says the revoked certificate is revoked')
    assert.match(revokedCheck.stdout, /REVOKED/)
    const validCheck = await sshKeygenResult([
      '-Q',
      '-f',
      krl,
      dir.file('valid-cert.pub', `${issued[1]!.certificate}\n`),
    ])
    assert.equal(validCheck.code, 0, `${validCheck.stdout}${validCheck.stderr}`)

    // The host CA's KRL lists nothing.
    const hostKrl = dir.file(
      `${host.id}.krl`,
      Buffer.from(await (await fetch(new URL(host.krlUrl, svc.baseUrl))).arrayBuffer()),
    )
    const hostListing = await sshKeygenResult(['-Q', '-l', '-f', hostKrl])
    assert.equal(hostListing.code, 0, hostListing.stderr)
    assert.doesNotMatch(hostListing.stdout, /serial:/)
  })

  test('the public key is public, as text/plain; an unknown CA is 404', async () => {
    const response = await fetch(new URL(user.publicKeyUrl, svc.baseUrl))
    assert.equal(response.status, 200)
    assert.equal(response.headers.get('content-type'), 'text/plain; charset=utf-8')
    assert.equal(await response.text(), `${user.publicKey}\n`)
    for (const path of [`/api/v1/ssh/ca/${randomUUID()}/public-key`, `/api/v1/ssh/ca/${randomUUID()}/krl`]) {
      const missing = await svc.request('GET', path)
      expectError(missing, 404, 'ssh_ca_not_found', path)
    }
  })

  test('a revoked certificate leaves the KRL once it has expired', async () => {
    const target = issued[1]!
    const revoked = await call('POST', `/ssh/certificates/${target.id}/revoke`, tenant, {})
    assert.equal(revoked.status, 200, revoked.text)
    const krlNow = async () => {
      const file = dir.file(
        `krl-${randomUUID()}`,
        Buffer.from(await (await fetch(new URL(user.krlUrl, svc.baseUrl))).arrayBuffer()),
      )
      return (await sshKeygenResult(['-Q', '-l', '-f', file])).stdout
    }
    assert.match(await krlNow(), new RegExp(`serial: ${target.serial}\\b`))
    const started = clock.now()
    try {
      clock.set(new Date(target.validBefore))
      assert.doesNotMatch(await krlNow(), new RegExp(`serial: ${target.serial}\\b`), 'expired: dropped')
      const view = await call('GET', `/ssh/certificates/${issued[2]!.id}`, tenant)
      assert.equal(view.body.status, 'valid')
      clock.set(new Date(issued[2]!.validBefore))
      assert.equal((await call('GET', `/ssh/certificates/${issued[2]!.id}`, tenant)).body.status, 'expired')
    } finally {
      clock.set(started)
    }
  })
})

describe('tenant isolation', () => {
  test('another tenant’s CA and certificates are 404, as unknown ones are', async () => {
    const a = await svc.createTenant()
    const b = await svc.createTenant()
    const ca = await createCa(a, { type: 'user' })
    const certificate = await issue(a, {
      caId: ca.id,
      publicKey: subjects['ed25519']!.publicLine,
      principals: ['a'],
    })
    const bCa = await createCa(b, { type: 'user' })
    const cases: [string, string, unknown, string][] = [
      ['GET', `/ssh/ca/${ca.id}`, undefined, 'ssh_ca_not_found'],
      ['PATCH', `/ssh/ca/${ca.id}`, { maxValiditySeconds: 3600 }, 'ssh_ca_not_found'],
      [
        'POST',
        '/ssh/certificates',
        { caId: ca.id, publicKey: subjects['ed25519']!.publicLine, principals: ['root'] },
        'ssh_ca_not_found',
      ],
      ['GET', `/ssh/certificates/${certificate.id}`, undefined, 'ssh_certificate_not_found'],
      ['POST', `/ssh/certificates/${certificate.id}/revoke`, {}, 'ssh_certificate_not_found'],
    ]
    for (const [method, path, body, code] of cases) {
      const foreign = await call(method, path, b, body)
      expectError(foreign, 404, code, `${method} ${path} by another tenant`)
      const unknown = await call(
        method,
        path.replace(ca.id, randomUUID()).replace(certificate.id, randomUUID()),
        b,
        body,
      )
      assert.deepEqual(foreign.body, unknown.body, `${method} ${path}: the same answer as an unknown id`)
    }
    const list = await call('GET', '/ssh/certificates', b)
    assert.equal(list.body.total, 0)
    const cas = await call('GET', '/ssh/ca', b)
    assert.deepEqual(
      cas.body.data.map((c: Ca) => c.id),
      [bCa.id],
    )
    const still = await call('GET', `/ssh/certificates/${certificate.id}`, a)
    assert.equal(still.body.status, 'valid', 'nothing of A changed')
    assert.equal((await call('GET', `/ssh/ca/${ca.id}`, a)).body.maxValiditySeconds, 24 * HOUR)
  })
})

describe('scopes and restricted API keys', () => {
  let owner: TenantWithKey
  let ca: Ca
  let certificate: Certificate
  before(async () => {
    owner = await svc.createTenant()
    ca = await createCa(owner, { type: 'user' })
    certificate = await issue(owner, {
      caId: ca.id,
      publicKey: subjects['ed25519']!.publicLine,
      principals: ['a'],
    })
  })
  const signBody = () => ({ caId: ca.id, publicKey: subjects['ed25519']!.publicLine, principals: ['a'] })

  test('ssh:read reads but cannot sign, revoke or change a CA; without ssh scopes nothing', async () => {
    const reader = await restrictedApiKey(owner, { scopes: ['ssh:read'] })
    assert.equal((await call('GET', '/ssh/ca', reader)).status, 200)
    assert.equal((await call('GET', `/ssh/certificates/${certificate.id}`, reader)).status, 200)
    for (const [method, path, body] of [
      ['POST', '/ssh/certificates', signBody()],
      ['POST', `/ssh/certificates/${certificate.id}/revoke`, {}],
      ['PATCH', `/ssh/ca/${ca.id}`, { maxValiditySeconds: 3600 }],
      ['POST', '/ssh/ca', { type: 'host' }],
    ] as const) {
      const res = await call(method, path, reader, body)
      expectError(res, 403, 'insufficient_scope', `${method} ${path} with ssh:read`)
      assert.equal(res.body.requiredScope, 'ssh:write')
    }
    const stranger = await restrictedApiKey(owner, { scopes: ['keys:read'] })
    const res = await call('GET', '/ssh/certificates', stranger)
    expectError(res, 403, 'insufficient_scope', 'no ssh scope')
    assert.equal(res.body.requiredScope, 'ssh:read')
    assert.equal((await call('GET', '/ssh/certificates', owner)).body.total, 1, 'nothing was signed')
  })

  test('an API key restricted to other keys cannot use the CA key: sign and revoke are 403', async () => {
    const otherKey = await call('POST', '/keys', owner, {
      name: uniqueName('other'),
      keyType: 'Signing',
      algorithm: 'Ed25519',
    })
    const restricted = await restrictedApiKey(owner, {
      scopes: ['ssh:read', 'ssh:write'],
      keys: [otherKey.body.id],
    })
    expectError(
      await call('POST', '/ssh/certificates', restricted, signBody()),
      403,
      'key_not_allowed',
      'sign',
    )
    expectError(
      await call('POST', `/ssh/certificates/${certificate.id}/revoke`, restricted, {}),
      403,
      'key_not_allowed',
      'revoke',
    )
    expectError(
      await call('POST', '/ssh/ca', restricted, { type: 'host' }),
      403,
      'key_not_allowed',
      'a CA on a new key',
    )
    const refused = (await auditRecords(owner.tenantId, 'crypto.ssh_certificate_issue')).filter(
      (r) => r.outcome === 'failure',
    )
    assert.equal(refused.at(-1)!.details?.['error'], 'key_not_allowed')
    assert.equal(refused.at(-1)!.resource, `key:${ca.keyId}`)

    const operations = await restrictedApiKey(owner, { scopes: ['ssh:write'], operations: ['encrypt'] })
    expectError(
      await call('POST', '/ssh/certificates', operations, signBody()),
      403,
      'operation_not_allowed',
      'an API key for encrypt only',
    )
    expectError(
      await call('POST', `/ssh/certificates/${certificate.id}/revoke`, operations, {}),
      403,
      'operation_not_allowed',
      'revocation by an API key for encrypt only',
    )

    const allowed = await restrictedApiKey(owner, {
      scopes: ['ssh:write'],
      keys: [ca.keyId],
      operations: ['sign'],
    })
    const signed = await call('POST', '/ssh/certificates', allowed, signBody())
    assert.equal(signed.status, 201, signed.text)
    const revoked = await call('POST', `/ssh/certificates/${certificate.id}/revoke`, allowed, {})
    assert.equal(revoked.status, 200, revoked.text)
    assert.equal((await call('GET', `/ssh/certificates/${certificate.id}`, owner)).body.status, 'revoked')
  })
})
