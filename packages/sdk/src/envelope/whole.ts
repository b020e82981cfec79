import { concatBytes } from '../bytes.ts'
import type { EncryptionContext } from './context.ts'
import { type DecryptOptions, decryptStream } from './decrypt.ts'
import { type EncryptOptions, encryptStream } from './encrypt.ts'
import type { Keyring } from './keyring.ts'

async function through(input: Uint8Array, transform: TransformStream<Uint8Array, Uint8Array>) {
  const parts: Uint8Array[] = []
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(input)
      controller.close()
    },
  })
  await source.pipeThrough(transform).pipeTo(new WritableStream({ write: (part) => void parts.push(part) }))
  return concatBytes(parts)
}

/** encryptStream over one buffer; its size is known, so a caching keyring may serve it. */
export async function encrypt(
  keyring: Keyring,
  plaintext: Uint8Array,
  options: Omit<EncryptOptions, 'plaintextLength'> = {},
): Promise<Uint8Array> {
  return through(plaintext, encryptStream(keyring, { ...options, plaintextLength: plaintext.length }))
}

/** decryptStream over one buffer: the plaintext and the message's (authenticated) context. */
export async function decrypt(
  keyring: Keyring,
  message: Uint8Array,
  options: DecryptOptions = {},
): Promise<{ plaintext: Uint8Array; context: EncryptionContext }> {
  const stream = decryptStream(keyring, options)
  const plaintext = await through(message, stream)
  return { plaintext, context: (await stream.header).context }
}
