import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  createCachingKeyring,
  createRawKeyring,
  decrypt,
  decryptStream,
  EnvelopeError,
  encrypt,
  encryptStream,
  type Keyring,
} from '@kms/sdk'

/**
 * The envelope streams on their own (a raw keyring, no service): bounded buffering however long
 * the stream, bounds on what a header may claim checked as soon as the bytes are there, and
 * bad options refused naming the option.
 */

const keyOf = (n: number) => ({
  edk: {
    providerId: 'kms',
    providerInfo: `00000000-0000-4000-8000-00000000000${n}`,
    encryptedDataKey: Uint8Array.of(n),
  },
  dataKey: new Uint8Array(32).fill(n),
})
const keyring = createRawKeyring([keyOf(1)])

test('a long stream is encrypted and decrypted with bounded buffering: bytes inside the pipeline stay under 1 MiB of 48 MiB', async () => {
  const total = 48 * 1024 * 1024
  const chunk = 64 * 1024
  let produced = 0
  let consumed = 0
  let mostInside = 0
  const source = new ReadableStream<Uint8Array>({
    pull(controller) {
      mostInside = Math.max(mostInside, produced - consumed)
      if (produced >= total) return controller.close()
      const part = new Uint8Array(chunk).fill(produced / chunk)
      produced += chunk
      controller.enqueue(part)
    },
  })
  let mismatches = 0
  await source
    .pipeThrough(encryptStream(keyring, { context: { big: 'yes' } }))
    .pipeThrough(decryptStream(keyring, { expectedContext: { big: 'yes' } }))
    .pipeTo(
      new WritableStream({
        write(part) {
          for (let i = 0; i < part.length; i += 4096) {
            const at = consumed + i
            if (part[i] !== (Math.floor(at / chunk) & 0xff)) mismatches++
          }
          consumed += part.length
        },
      }),
    )
  assert.equal(consumed, total)
  assert.equal(mismatches, 0)
  assert.ok(mostInside <= 1024 * 1024, `at most ${mostInside} bytes were inside the pipeline`)
})

/**
 * Writes `bytes` to a decrypt stream: the error it failed with, if any. With `end` false the
 * stream is left open, so what fails failed on the bytes so far alone.
 */
async function feed(bytes: Uint8Array, options = {}, end = true): Promise<unknown> {
  const stream = decryptStream(keyring, options)
  const writer = stream.writable.getWriter()
  const reading = (async () => {
    for await (const _ of stream.readable);
  })().then(
    () => undefined,
    (error: unknown) => error,
  )
  const written = await writer.write(bytes).then(
    () => undefined,
    (error: unknown) => error,
  )
  if (!end || written) return written
  await writer.close().catch(() => {})
  return reading
}

test('an unknown version fails on the first byte, too many encrypted data keys before the keys arrive', async () => {
  const error = await feed(Uint8Array.of(2), {}, false)
  assert.ok(error instanceof EnvelopeError)
  assert.equal(error.code, 'unsupported_version')

  const three = await encrypt(
    createRawKeyring([
      keyOf(1),
      { ...keyOf(2), dataKey: keyOf(1).dataKey },
      { ...keyOf(3), dataKey: keyOf(1).dataKey },
    ]),
    Uint8Array.of(1),
  )
  // version, algorithm, message id, context length (0), key count: nothing of the keys yet.
  const prefix = three.subarray(0, 1 + 2 + 32 + 2 + 2)
  const tooMany = await feed(prefix, { maxEncryptedDataKeys: 2 }, false)
  assert.ok(tooMany instanceof EnvelopeError)
  assert.equal(tooMany.code, 'too_many_encrypted_data_keys')
  // Within the limit the same message opens.
  const opener = createRawKeyring([{ ...keyOf(3), dataKey: keyOf(1).dataKey }])
  assert.deepEqual((await decrypt(opener, three, { maxEncryptedDataKeys: 3 })).plaintext, Uint8Array.of(1))
})

test('a stream ending inside the header is truncated; a final frame claiming more than the frame length is refused', async () => {
  const message = await encrypt(keyring, new Uint8Array(10), { frameLength: 128 })
  const inHeader = await feed(message.subarray(0, 40))
  assert.equal((inHeader as EnvelopeError).code, 'truncated')
  const bad = message.slice()
  const finalStart = message.length - (24 + 10 + 16)
  new DataView(bad.buffer).setUint32(finalStart + 20, 129)
  const error = await feed(bad)
  assert.equal((error as EnvelopeError).code, 'frame_authentication_failed')
})

test('bad options are refused naming the option', async () => {
  assert.throws(() => encryptStream(keyring, { frameLength: 127 }), /frameLength/)
  assert.throws(() => encryptStream(keyring, { frameLength: 2 ** 20 + 1 }), /frameLength/)
  assert.throws(() => encryptStream(keyring, { framesInFlight: 0 }), /framesInFlight/)
  assert.throws(() => decryptStream(keyring, { maxEncryptedDataKeys: 0 }), /maxEncryptedDataKeys/)
  const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v']))
  await assert.rejects(
    encrypt(keyring, Uint8Array.of(1), { context: many }),
    /context must have at most 64 pairs/,
  )
  await assert.rejects(
    encrypt(keyring, Uint8Array.of(1), { context: { '': 'v' } }),
    /context keys must be 1 to 256/,
  )
  const stated = encryptStream(keyring, { plaintextLength: 5 })
  await assert.rejects(
    new Response(new Blob([new Uint8Array(4)]).stream().pipeThrough(stated)).arrayBuffer(),
    /plaintextLength/,
  )
})

test('the data-key cache holds at most maxEntries keys per direction: the least recently used one goes', async () => {
  let generated = 0
  let decrypted = 0
  const counted: Keyring = {
    generateDataKey(context, usage) {
      generated++
      return keyring.generateDataKey(context, usage)
    },
    decryptDataKey(edks, context) {
      decrypted++
      return keyring.decryptDataKey(edks, context)
    },
  }
  const cache = createCachingKeyring(counted, {
    maxAgeMs: 60_000,
    maxMessages: 100,
    maxBytes: 10_000,
    maxEntries: 2,
    clock: () => 0,
  })
  const a = await encrypt(cache, Uint8Array.of(1), { context: { c: 'a' } })
  const b = await encrypt(cache, Uint8Array.of(1), { context: { c: 'b' } })
  await encrypt(cache, Uint8Array.of(1), { context: { c: 'a' } })
  assert.equal(generated, 2, 'a and b are both cached')
  await encrypt(cache, Uint8Array.of(1), { context: { c: 'c' } })
  await encrypt(cache, Uint8Array.of(1), { context: { c: 'a' } })
  assert.equal(generated, 3, 'c evicted b (least recently used), a stayed')
  await encrypt(cache, Uint8Array.of(1), { context: { c: 'b' } })
  assert.equal(generated, 4)

  await decrypt(cache, a)
  await decrypt(cache, b)
  await decrypt(cache, a)
  assert.equal(decrypted, 2)
  const other = await encrypt(keyring, Uint8Array.of(2), { context: { c: 'd' } })
  await decrypt(cache, other)
  await decrypt(cache, b)
  assert.equal(decrypted, 4, "the third message's key evicted b's")
})
