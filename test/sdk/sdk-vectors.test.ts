import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { createRawKeyring, decrypt, decryptStream, EnvelopeError, encrypt } from '@kms/sdk'
import { buildVectors, VECTORS_FILE } from '../../scripts/make-sdk-vectors.ts'
import { type Edk, FormatError, independentDecrypt } from './independent-decryptor.ts'

/**
 * The published test vectors (packages/sdk/vectors/vectors.json): the committed file is what the
 * generator makes from its fixed inputs, and every vector decrypts, or fails with its error
 * code, both through the SDK and through an independent decryptor on @noble (no SDK code).
 */

interface Vector {
  name: string
  dataKeys: { providerId: string; providerInfo: string; encryptedDataKey: string; dataKey: string }[]
  encryptionContext: Record<string, string>
  expectedContext?: Record<string, string>
  frameLength: number
  message: string
  plaintext?: { hex: string } | { length: number; sha256: string }
  expectedError?: string
}

const manifest = JSON.parse(await readFile(VECTORS_FILE, 'utf8')) as { vectors: Vector[] }
const fromHex = (hex: string) => new Uint8Array(Buffer.from(hex, 'hex'))

function keyringOf(vector: Vector) {
  return createRawKeyring(
    vector.dataKeys.map((k) => ({
      edk: {
        providerId: k.providerId,
        providerInfo: k.providerInfo,
        encryptedDataKey: fromHex(k.encryptedDataKey),
      },
      dataKey: fromHex(k.dataKey),
    })),
  )
}

function lookupOf(vector: Vector) {
  return (edk: Edk) => {
    const hit = vector.dataKeys.find(
      (k) =>
        k.providerId === edk.providerId &&
        k.providerInfo === edk.providerInfo &&
        k.encryptedDataKey === Buffer.from(edk.encryptedDataKey).toString('hex'),
    )
    return hit ? fromHex(hit.dataKey) : undefined
  }
}

function assertPlaintext(vector: Vector, plaintext: Uint8Array) {
  const expected = vector.plaintext!
  if ('hex' in expected) assert.equal(Buffer.from(plaintext).toString('hex'), expected.hex, vector.name)
  else {
    assert.equal(plaintext.length, expected.length, vector.name)
    assert.equal(createHash('sha256').update(plaintext).digest('hex'), expected.sha256, vector.name)
  }
}

test('the committed vectors are exactly what scripts/make-sdk-vectors.ts generates (the encoder is unchanged)', async () => {
  assert.equal(await buildVectors(), await readFile(VECTORS_FILE, 'utf8'))
})

test('the vectors cover the cases the format promises', () => {
  const names = manifest.vectors.map((v) => v.name)
  const errors = new Set(manifest.vectors.map((v) => v.expectedError).filter(Boolean))
  for (const name of [
    'empty',
    'one-byte',
    'exactly-one-frame',
    'several-frames-and-partial',
    'two-encrypted-data-keys',
  ])
    assert.ok(names.includes(name), name)
  for (const code of [
    'frame_authentication_failed',
    'header_authentication_failed',
    'commitment_mismatch',
    'truncated',
    'frame_out_of_order',
    'trailing_data',
    'too_many_encrypted_data_keys',
    'unsupported_version',
    'unsupported_algorithm',
  ])
    assert.ok(errors.has(code), code)
})

test('the SDK decrypts every vector, or fails with its error code (whole and streamed in 1000-byte pieces)', async () => {
  for (const vector of manifest.vectors) {
    const message = new Uint8Array(Buffer.from(vector.message, 'base64'))
    const options = vector.expectedContext ? { expectedContext: vector.expectedContext } : {}
    const keyring = keyringOf(vector)
    if (vector.expectedError) {
      await assert.rejects(decrypt(keyring, message, options), (error: unknown) => {
        assert.ok(error instanceof EnvelopeError, vector.name)
        assert.equal(error.code, vector.expectedError, vector.name)
        return true
      })
      continue
    }
    const { plaintext, context } = await decrypt(keyring, message, options)
    assertPlaintext(vector, plaintext)
    assert.deepEqual(context, vector.encryptionContext, vector.name)
    // The same, fed in pieces that split header fields and frames.
    const stream = decryptStream(keyring, options)
    const pieces = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < message.length; i += 1000) controller.enqueue(message.slice(i, i + 1000))
        controller.close()
      },
    })
    const parts: Uint8Array[] = []
    for await (const part of pieces.pipeThrough(stream)) parts.push(part)
    assertPlaintext(vector, Buffer.concat(parts))
  }
})

test('an independent decryptor (@noble, none of the SDK) agrees on every vector', () => {
  for (const vector of manifest.vectors) {
    const message = new Uint8Array(Buffer.from(vector.message, 'base64'))
    const options = vector.expectedContext ? { expectedContext: vector.expectedContext } : {}
    if (vector.expectedError) {
      assert.throws(
        () => independentDecrypt(message, lookupOf(vector), options),
        (error: unknown) => error instanceof FormatError && error.code === vector.expectedError,
        vector.name,
      )
      continue
    }
    const { plaintext, context } = independentDecrypt(message, lookupOf(vector), options)
    assertPlaintext(vector, plaintext)
    assert.deepEqual(context, vector.encryptionContext, vector.name)
  }
})

test('what the SDK encrypts, the independent decryptor decrypts (sizes around frame boundaries)', async () => {
  const vector = manifest.vectors.find((v) => v.name === 'two-encrypted-data-keys')!
  const keyring = keyringOf(vector)
  const context = { ключ: 'значение', a: '' }
  for (const frameLength of [128, 1000]) {
    for (const size of [
      0,
      1,
      frameLength - 1,
      frameLength,
      frameLength + 1,
      5 * frameLength,
      5 * frameLength + 7,
    ]) {
      const plaintext = new Uint8Array(Buffer.alloc(size, 0).map((_, i) => (i * 13) & 0xff))
      const message = await encrypt(keyring, plaintext, { context, frameLength })
      const opened = independentDecrypt(message, lookupOf(vector))
      assert.deepEqual(opened.plaintext, plaintext, `frame ${frameLength}, size ${size}`)
      assert.deepEqual(opened.context, context)
    }
  }
})
