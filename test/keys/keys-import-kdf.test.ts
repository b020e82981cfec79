import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { legacyPbeEncrypted, OIDS, pbkdf2Encrypted, scryptEncrypted, seq, toPem } from '../helpers/der.ts'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * Issue 15, defect 2: the key-derivation cost of an encrypted PKCS#8 import is chosen by the
 * caller and was paid before the password was checked (2^31-1 PBKDF2 iterations: ~15 CPU
 * minutes). The parameters are now read from the ASN.1 and refused above the documented bounds
 * (docs/decisions.md, "Hardening: crypto pool"): the refusal comes before any pool task runs.
 */

const IMPORT = '/api/v1/keys/import'
const PASSWORD = 'Kdf-bound-pass-phrase-41'

describe('encrypted PKCS#8 import: KDF cost bounds', () => {
  let svc: TestService
  let tenant: TenantWithKey

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
  })
  after(async () => svc?.stop())

  /** Imports `keyMaterial` as an Ed25519 key; asserts a 400 with `code` and that no pool task ran. */
  async function refusedWithoutPoolTask(
    format: 'PEM' | 'PKCS#8' | 'DER',
    keyMaterial: string,
    code: string,
    label: string,
  ): Promise<string> {
    const pool = svc.api.services.cryptoPool
    const tasksBefore = pool.completedTasks()
    const res = await svc.request('POST', IMPORT, {
      key: tenant.key,
      body: {
        name: `kdf-${randomBytes(4).toString('hex')}`,
        keyType: 'Signing',
        algorithm: 'Ed25519',
        format,
        keyMaterial,
        password: PASSWORD,
      },
    })
    assert.equal(res.status, 400, `${label}: ${res.text}`)
    assert.equal(res.body.error, code, label)
    // Structural proof that the KDF was not run: the answer waits for any task it starts.
    assert.equal(pool.completedTasks(), tasksBefore, `${label}: no crypto-pool task ran`)
    assert.ok(!res.text.includes(PASSWORD), `${label}: the password is not echoed`)
    return res.body.message as string
  }

  test('20,000,000 PBKDF2 iterations are refused with 400 naming the count and the bound', async () => {
    const der = pbkdf2Encrypted(20_000_000)
    const message = await refusedWithoutPoolTask(
      'PEM',
      toPem(der, 'ENCRYPTED PRIVATE KEY'),
      'kdf_cost_too_high',
      'PEM',
    )
    assert.match(message, /keyMaterial/)
    assert.match(message, /PBKDF2 iteration count 20000000/)
    assert.match(message, /10000000/)
    await refusedWithoutPoolTask('PKCS#8', der.toString('base64'), 'kdf_cost_too_high', 'PKCS#8 DER')
    await refusedWithoutPoolTask('DER', der.toString('base64'), 'kdf_cost_too_high', 'DER')
  })

  test('2^31-1 PBKDF2 iterations are refused before any work', async () => {
    const der = pbkdf2Encrypted(2 ** 31 - 1)
    const message = await refusedWithoutPoolTask(
      'PKCS#8',
      toPem(der, 'ENCRYPTED PRIVATE KEY'),
      'kdf_cost_too_high',
      '2^31-1',
    )
    assert.match(message, /2147483647/)
  })

  test('a PEM block under another label is checked too', async () => {
    const text = `${toPem(pbkdf2Encrypted(50_000_000), 'PRIVATE KEY')}`
    await refusedWithoutPoolTask('PEM', text, 'kdf_cost_too_high', 'mislabelled PEM')
  })

  test('the PEM scan is bounded: more than 16 blocks are refused, a BEGIN without END is not a block', async () => {
    const many = toPem(pbkdf2Encrypted(1000), 'PRIVATE KEY').repeat(17)
    const message = await refusedWithoutPoolTask('PEM', many, 'invalid_key_material', '17 blocks')
    assert.match(message, /more than 16 PEM blocks/)
    // 7,000 BEGIN lines with no END (the 200,000-character limit of keyMaterial): one scan, no
    // block, and the usual parse error.
    const res = await svc.request('POST', IMPORT, {
      key: tenant.key,
      body: {
        name: 'begins',
        keyType: 'Signing',
        algorithm: 'Ed25519',
        format: 'PEM',
        keyMaterial: '-----BEGIN PRIVATE KEY-----'.repeat(7000),
      },
    })
    assert.equal(res.status, 400, res.text)
    assert.equal(res.body.error, 'invalid_key_material')
  })

  test('scrypt past the memory bound (128*N*r) or the parallelism bound is refused', async () => {
    const huge = await refusedWithoutPoolTask(
      'PKCS#8',
      scryptEncrypted(2 ** 20, 8, 1).toString('base64'),
      'kdf_cost_too_high',
      'scrypt N=2^20 r=8',
    )
    assert.match(huge, /scrypt N=1048576, r=8/)
    assert.match(huge, /33554432/)
    await refusedWithoutPoolTask(
      'PKCS#8',
      scryptEncrypted(2n ** 62n, 1, 1).toString('base64'),
      'kdf_cost_too_high',
      'scrypt N=2^62',
    )
    const parallel = await refusedWithoutPoolTask(
      'PKCS#8',
      scryptEncrypted(2 ** 14, 8, 1 << 20).toString('base64'),
      'kdf_cost_too_high',
      'scrypt p=2^20',
    )
    assert.match(parallel, /p=1048576 exceeds the bound of 16/)
  })

  test('legacy PBES1 and PKCS#12 schemes are bounded by the same iteration count', async () => {
    await refusedWithoutPoolTask(
      'DER',
      legacyPbeEncrypted(OIDS.pkcs12Sha1TripleDes, 20_000_000).toString('base64'),
      'kdf_cost_too_high',
      'PKCS#12 PBE',
    )
    await refusedWithoutPoolTask(
      'DER',
      legacyPbeEncrypted(OIDS.pbes1Md5Des, 2 ** 31 - 1).toString('base64'),
      'kdf_cost_too_high',
      'PBES1',
    )
  })

  test('an unknown encryption scheme and BER indefinite lengths are refused', async () => {
    const unknown = seq(seq(Buffer.from('06032a0304', 'hex')), Buffer.from('0400', 'hex'))
    await refusedWithoutPoolTask(
      'DER',
      unknown.toString('base64'),
      'unsupported_key_encryption',
      'unknown OID',
    )
    // SEQUENCE of indefinite length wrapping an encrypted key: a reader of DER alone would miss it.
    const der = pbkdf2Encrypted(2 ** 31 - 1)
    const header = der[1]! & 0x80 ? 2 + (der[1]! & 0x7f) : 2
    const ber = Buffer.concat([Buffer.of(0x30, 0x80), der.subarray(header), Buffer.of(0, 0)])
    await refusedWithoutPoolTask('DER', ber.toString('base64'), 'invalid_key_material', 'BER')
  })

  test('an ENCRYPTED PRIVATE KEY block with legacy PEM headers is refused; a legacy-encrypted RSA PEM still imports', async () => {
    const body = toPem(pbkdf2Encrypted(2 ** 31 - 1), 'ENCRYPTED PRIVATE KEY').replace(
      '-----\n',
      '-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00112233445566778899AABBCCDDEEFF\n\n',
    )
    await refusedWithoutPoolTask('PEM', body, 'invalid_key_material', 'PEM headers')

    const plain = execFileSync('openssl', [
      'genpkey',
      '-algorithm',
      'RSA',
      '-pkeyopt',
      'rsa_keygen_bits:2048',
    ])
    const legacy = execFileSync(
      'openssl',
      ['rsa', '-traditional', '-aes256', '-passout', `pass:${PASSWORD}`],
      { input: plain, stdio: ['pipe', 'pipe', 'pipe'] },
    ).toString()
    assert.match(legacy, /Proc-Type: 4,ENCRYPTED/)
    const res = await svc.request('POST', IMPORT, {
      key: tenant.key,
      body: {
        name: `legacy-${randomBytes(4).toString('hex')}`,
        keyType: 'Signing',
        algorithm: 'RSA-2048',
        format: 'PEM',
        keyMaterial: legacy,
        password: PASSWORD,
      },
    })
    assert.equal(res.status, 201, res.text)
  })

  test('keys within the bounds still import: openssl scrypt (N=16384, r=8, p=1) and PBKDF2', async () => {
    const { privateKey } = generateKeyPairSync('ed25519')
    const plain = privateKey.export({ format: 'pem', type: 'pkcs8' }) as string
    for (const args of [
      ['-scrypt', '-scrypt_N', '16384', '-scrypt_r', '8', '-scrypt_p', '1'],
      ['-v2', 'aes-256-cbc', '-v2prf', 'hmacWithSHA256', '-iter', '100000'],
    ]) {
      const encrypted = execFileSync(
        'openssl',
        ['pkcs8', '-topk8', ...args, '-passout', `pass:${PASSWORD}`],
        {
          input: plain,
        },
      ).toString()
      const res = await svc.request('POST', IMPORT, {
        key: tenant.key,
        body: {
          name: `kdf-ok-${randomBytes(4).toString('hex')}`,
          keyType: 'Signing',
          algorithm: 'Ed25519',
          format: 'PEM',
          keyMaterial: encrypted,
          password: PASSWORD,
        },
      })
      assert.equal(res.status, 201, `${args[0]}: ${res.text}`)
    }
  })
})
