import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import {
  createCachingKeyring,
  createKmsClient,
  createServiceKeyring,
  dataOf,
  decrypt,
  decryptStream,
  EnvelopeError,
  encrypt,
  encryptStream,
  type Keyring,
  type KmsClient,
} from '@kms/sdk'
import { startTestService, type TestService } from '../helpers/service.ts'
import { independentDecrypt } from './independent-decryptor.ts'

/**
 * Local envelope encryption over the real service: data keys from POST /keys/{keyId}/data-key
 * with the message's map context, wrapped under further keys, recovered with unwrap; what fails
 * (a changed context, a key the caller may not use, another tenant) fails without plaintext;
 * a tampered stream releases nothing of its bad frame; the data-key cache keeps its bounds.
 */

let svc: TestService
let client: KmsClient
let keyA: string
let keyB: string
before(async () => {
  svc = await startTestService()
  const tenant = await svc.createTenant()
  client = createKmsClient({ baseUrl: svc.baseUrl, apiKey: tenant.key })
  const create = async (name: string) =>
    (await dataOf(client.api.POST('/api/v1/keys', { body: { name, keyType: 'Encryption' } }))).id
  keyA = await create('sdk-envelope-a')
  keyB = await create('sdk-envelope-b')
  await dataOf(client.api.POST('/api/v1/aliases', { body: { alias: 'alias/sdk-second', keyId: keyB } }))
})
after(async () => {
  await svc?.stop()
})

const CONTEXT = { tenant: 'acme', ключ: 'значение' }
const patterned = (length: number) => {
  const out = new Uint8Array(length)
  for (let i = 0; i < length; i++) out[i] = (i * 7 + (i >> 7)) & 0xff
  return out
}

/** Reads a decrypt stream fed in `piece`-byte parts: what it released, and how it ended. */
async function streamDecrypt(
  keyring: Keyring,
  message: Uint8Array,
  options: { framesInFlight?: number } = {},
) {
  const stream = decryptStream(keyring, options)
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let i = 0; i < message.length; i += 100) controller.enqueue(message.slice(i, i + 100))
      controller.close()
    },
  })
  const released: Uint8Array[] = []
  let error: unknown
  try {
    for await (const part of source.pipeThrough(stream)) released.push(part)
  } catch (e) {
    error = e
  }
  return { released: Buffer.concat(released), error }
}

function frameStarts(message: Uint8Array, headerLength: number, frameLength: number): number[] {
  const starts: number[] = []
  const view = new DataView(message.buffer, message.byteOffset)
  for (let at = headerLength; at < message.length; ) {
    starts.push(at)
    at += view.getUint32(at) === 0xffffffff ? 24 + view.getUint32(at + 20) + 16 : 16 + frameLength + 16
  }
  return starts
}

test('a message under a service key round-trips with a map context; an independent decryptor opens it too', async () => {
  const keyring = createServiceKeyring(client, { keyIds: [keyA] })
  const plaintext = patterned(10_000)
  const message = await encrypt(keyring, plaintext, { context: CONTEXT })
  const opened = await decrypt(keyring, message, { expectedContext: { tenant: 'acme' } })
  assert.deepEqual(opened.plaintext, plaintext)
  assert.deepEqual(opened.context, CONTEXT)

  // The header names key A and carries the service's encryptedDek: unwrap it through the API with
  // the same map context and open the message with @noble alone.
  const stream = decryptStream(keyring)
  await new Response(new Blob([message]).stream().pipeThrough(stream)).arrayBuffer()
  const [edk] = (await stream.header).encryptedDataKeys
  assert.equal(edk!.providerId, 'kms')
  assert.equal(edk!.providerInfo, keyA)
  const unwrapped = await dataOf(
    client.api.POST('/api/v1/keys/{keyId}/unwrap', {
      params: { path: { keyId: keyA } },
      body: { encryptedDek: Buffer.from(edk!.encryptedDataKey).toString('base64'), context: CONTEXT },
    }),
  )
  const independent = independentDecrypt(
    message,
    () => new Uint8Array(Buffer.from(unwrapped.plaintext, 'base64')),
  )
  assert.deepEqual(independent.plaintext, plaintext)
  assert.deepEqual(independent.context, CONTEXT)
})

test('a header whose context was changed gets no data key: the service says decryption_failed, decrypt says no_decryptable_data_key', async () => {
  const keyring = createServiceKeyring(client, { keyIds: [keyA] })
  const message = await encrypt(keyring, patterned(500), { context: { tenant: 'acme' } })
  const tampered = message.slice()
  const at = Buffer.from(tampered).indexOf('acme') + 3
  tampered[at]! ^= 0x02 // 'acme' -> 'acmg': still a valid context, not the one the data key is bound to
  const { released, error } = await streamDecrypt(keyring, tampered)
  assert.equal(released.length, 0)
  assert.ok(error instanceof EnvelopeError)
  assert.equal(error.code, 'no_decryptable_data_key')
  assert.deepEqual(
    error.reasons.map((r) => [r.providerInfo, r.status, r.code]),
    [[keyA, 400, 'decryption_failed']],
  )
  // The caller's expected pairs are checked before the service is asked.
  await assert.rejects(decrypt(keyring, message, { expectedContext: { tenant: 'globex' } }), {
    code: 'context_mismatch',
  })
})

test('two keys: the data key comes from the first and is wrapped under the second, so a caller allowed only the second decrypts', async () => {
  const keyring = createServiceKeyring(client, { keyIds: [keyA, 'alias/sdk-second'] })
  const plaintext = patterned(3000)
  const message = await encrypt(keyring, plaintext, { context: CONTEXT })

  const made = await dataOf(
    client.api.POST('/api/v1/api-keys', {
      body: { name: 'only-b', scopes: ['encryption:write'], keys: [keyB], operations: ['unwrap'] },
    }),
  )
  const onlyB = createKmsClient({ baseUrl: svc.baseUrl, apiKey: made.key })
  // The header carries key A's data key first: the restricted caller is refused it, and key B's opens.
  const restricted = createServiceKeyring(onlyB, { keyIds: [keyA, keyB] })
  const opened = await decrypt(restricted, message)
  assert.deepEqual(opened.plaintext, plaintext)
  // What the refusal of key A looks like on its own: the service's answer, per key, no key material.
  const stream = decryptStream(keyring)
  await new Response(new Blob([message]).stream().pipeThrough(stream)).arrayBuffer()
  const edks = (await stream.header).encryptedDataKeys
  assert.deepEqual(
    edks.map((e) => e.providerInfo),
    [keyA, keyB],
  )
  await assert.rejects(restricted.decryptDataKey([edks[0]!], CONTEXT), (error: unknown) => {
    assert.ok(error instanceof EnvelopeError)
    assert.equal(error.code, 'no_decryptable_data_key')
    assert.equal(error.reasons.length, 1)
    assert.equal(error.reasons[0]!.status, 403)
    assert.equal(error.reasons[0]!.code, 'key_not_allowed')
    const text = `${error.message} ${JSON.stringify(error.reasons)}`
    assert.ok(!text.includes(Buffer.from(edks[0]!.encryptedDataKey).toString('base64')))
    assert.ok(!text.includes(made.key))
    return true
  })
  // A keyring naming the second key by its alias alone finds its data key (the service resolves the alias).
  const byAlias = createServiceKeyring(onlyB, { keyIds: ['alias/sdk-second'] })
  assert.deepEqual((await decrypt(byAlias, message)).plaintext, plaintext)
})

test("another tenant's API key cannot decrypt: no_decryptable_data_key with the service's answer, and no plaintext", async () => {
  const keyring = createServiceKeyring(client, { keyIds: [keyA] })
  const message = await encrypt(keyring, patterned(1000), { context: CONTEXT })
  const other = await svc.createTenant()
  const otherClient = createKmsClient({ baseUrl: svc.baseUrl, apiKey: other.key })
  for (const otherKeyring of [
    createServiceKeyring(otherClient, { keyIds: [keyA] }),
    createServiceKeyring(otherClient, { keyIds: [crypto.randomUUID()], discovery: true }),
  ]) {
    const { released, error } = await streamDecrypt(otherKeyring, message)
    assert.equal(released.length, 0)
    assert.ok(error instanceof EnvelopeError)
    assert.equal(error.code, 'no_decryptable_data_key')
    assert.equal(error.reasons[0]!.providerInfo, keyA)
    // The service does not tell another tenant that the key exists.
    assert.equal(error.reasons[0]!.status, 404)
    assert.equal(error.reasons[0]!.code, 'key_not_found')
  }
  // A strict keyring does not even ask the service about a key it was not given.
  const strict = createServiceKeyring(otherClient, { keyIds: [crypto.randomUUID()] })
  await assert.rejects(decrypt(strict, message), (error: unknown) => {
    assert.ok(error instanceof EnvelopeError)
    assert.equal(error.reasons[0]!.code, 'not_in_keyring')
    return true
  })
})

test('a tampered stream releases every frame before the bad one and nothing of it: a flip in each frame, a swap, a dropped final frame', async () => {
  const keyring = createServiceKeyring(client, { keyIds: [keyA] })
  const frameLength = 128
  const plaintext = patterned(5 * frameLength + 50)
  const message = await encrypt(keyring, plaintext, { context: CONTEXT, frameLength })
  const stream = decryptStream(keyring)
  await new Response(new Blob([message]).stream().pipeThrough(stream)).arrayBuffer()
  const headerLength = message.length - (5 * (16 + frameLength + 16) + 24 + 50 + 16)
  const starts = frameStarts(message, headerLength, frameLength)
  assert.equal(starts.length, 6)

  for (const [index, start] of starts.entries()) {
    const sequence = index + 1
    const tampered = message.slice()
    tampered[start + (sequence === 6 ? 24 : 16) + 5]! ^= 0x80
    // One frame at a time: each verified frame is released before the next is read.
    const one = await streamDecrypt(keyring, tampered, { framesInFlight: 1 })
    assert.ok(one.error instanceof EnvelopeError)
    assert.equal(one.error.code, 'frame_authentication_failed')
    assert.equal(one.error.sequenceNumber, sequence)
    assert.deepEqual(
      one.released,
      Buffer.from(plaintext.subarray(0, index * frameLength)),
      `frame ${sequence}`,
    )
    // Pipelined: a prefix of what precedes the bad frame, never more.
    const many = await streamDecrypt(keyring, tampered)
    assert.equal((many.error as EnvelopeError).code, 'frame_authentication_failed')
    assert.ok(many.released.length <= index * frameLength)
    assert.deepEqual(many.released, Buffer.from(plaintext.subarray(0, many.released.length)))
  }

  const [f1, f2, f3] = starts as [number, number, number]
  const swapped = Buffer.concat([
    message.subarray(0, f2),
    message.subarray(f3, starts[3]),
    message.subarray(f2, f3),
    message.subarray(starts[3]),
  ])
  const swap = await streamDecrypt(keyring, swapped, { framesInFlight: 1 })
  assert.equal((swap.error as EnvelopeError).code, 'frame_out_of_order')
  assert.equal((swap.error as EnvelopeError).expectedSequenceNumber, 2)
  assert.equal((swap.error as EnvelopeError).sequenceNumber, 3)
  assert.ok(swap.released.length <= frameLength, 'nothing of the swapped frames')
  assert.deepEqual(swap.released, Buffer.from(plaintext.subarray(0, swap.released.length)))
  assert.ok(f1 === headerLength)

  const dropped = await streamDecrypt(keyring, message.subarray(0, starts[5]), { framesInFlight: 1 })
  assert.equal((dropped.error as EnvelopeError).code, 'truncated')
  assert.ok(dropped.released.length <= 5 * frameLength, 'nothing of the final frame')
  assert.deepEqual(dropped.released, Buffer.from(plaintext.subarray(0, dropped.released.length)))
})

test('the data-key cache keeps its bounds: messages, bytes, age (a manual clock), streams of unknown size bypass it', async () => {
  const calls = { generate: 0, decrypt: 0 }
  const service = createServiceKeyring(client, { keyIds: [keyA] })
  const counted: Keyring = {
    generateDataKey(context, usage) {
      calls.generate++
      return service.generateDataKey(context, usage)
    },
    decryptDataKey(edks, context) {
      calls.decrypt++
      return service.decryptDataKey(edks, context)
    },
  }
  let now = 1_000_000
  const keyring = createCachingKeyring(counted, {
    maxAgeMs: 60_000,
    maxMessages: 3,
    maxBytes: 1000,
    clock: () => now,
  })
  const edkOf = async (message: Uint8Array) => {
    const stream = decryptStream(keyring)
    await new Response(new Blob([message]).stream().pipeThrough(stream)).arrayBuffer()
    const header = await stream.header
    return {
      edk: Buffer.from(header.encryptedDataKeys[0]!.encryptedDataKey).toString('hex'),
      id: header.messageId,
    }
  }

  // Messages: three share one data key, the fourth needs a new one.
  const first: Uint8Array[] = []
  for (let i = 0; i < 3; i++) first.push(await encrypt(keyring, patterned(100), { context: CONTEXT }))
  assert.equal(calls.generate, 1)
  const headers = await Promise.all(first.map(edkOf))
  assert.equal(new Set(headers.map((h) => h.edk)).size, 1, 'one data key')
  assert.equal(
    new Set(headers.map((h) => Buffer.from(h.id).toString('hex'))).size,
    3,
    'each message its own id',
  )
  await encrypt(keyring, patterned(100), { context: CONTEXT })
  assert.equal(calls.generate, 2)

  // Bytes: 100 + 900 fit the 1000-byte bound, one more byte does not.
  await encrypt(keyring, patterned(900), { context: CONTEXT })
  assert.equal(calls.generate, 2)
  await encrypt(keyring, patterned(1), { context: CONTEXT })
  assert.equal(calls.generate, 3)

  // Age: past maxAgeMs the cached key is not used.
  now += 60_000
  await encrypt(keyring, patterned(1), { context: CONTEXT })
  assert.equal(calls.generate, 4)

  // Another context is another entry.
  await encrypt(keyring, patterned(1), { context: { other: 'context' } })
  assert.equal(calls.generate, 5)

  // A stream of unknown size never uses the cache; stating its size does.
  const streamed = async (plaintextLength?: number) => {
    const stream = encryptStream(keyring, {
      context: CONTEXT,
      ...(plaintextLength === undefined ? {} : { plaintextLength }),
    })
    return new Uint8Array(
      await new Response(new Blob([patterned(10)]).stream().pipeThrough(stream)).arrayBuffer(),
    )
  }
  await streamed()
  await streamed()
  assert.equal(calls.generate, 7)
  await streamed(10)
  assert.equal(calls.generate, 7)

  // Decryption: the same message's data key is asked for once while it is fresh.
  const message = first[0]!
  const before = calls.decrypt
  await decrypt(keyring, message)
  await decrypt(keyring, message)
  assert.equal(calls.decrypt - before, 1)
  now += 60_000
  await decrypt(keyring, message)
  assert.equal(calls.decrypt - before, 2)
})
