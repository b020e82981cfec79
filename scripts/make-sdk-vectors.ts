import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { concatBytes } from '../packages/sdk/src/bytes.ts'
import type { EncryptionContext } from '../packages/sdk/src/envelope/context.ts'
import { encryptStreamWithMessageId } from '../packages/sdk/src/envelope/encrypt.ts'
import type { EnvelopeErrorCode } from '../packages/sdk/src/envelope/errors.ts'
import {
  decodeHeader,
  deriveMessageKeys,
  type EncryptedDataKey,
  encodeHeaderBody,
  IV_BYTES,
} from '../packages/sdk/src/envelope/format.ts'
import { createRawKeyring, type RawKeyringEntry } from '../packages/sdk/src/envelope/keyring.ts'

/**
 * The SDK's published test vectors (packages/sdk/vectors/vectors.json): messages of format v1
 * made from fixed inputs (data keys, message ids and plaintexts derived from labels), so the same
 * run always writes the same file, and test/sdk/sdk-vectors.test.ts checks that it still does.
 * Negative vectors are valid messages changed afterwards, each to exactly one defect.
 *   node scripts/make-sdk-vectors.ts       (writes the file)
 */
export const VECTORS_FILE = join(import.meta.dirname, '..', 'packages', 'sdk', 'vectors', 'vectors.json')

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')
const base64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes))
const sha256 = async (bytes: Uint8Array) =>
  new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>))

/** 32 fixed bytes named by a label (SHA-256 of it). */
const fixed = (label: string) => sha256(new TextEncoder().encode(`kms-sdk test vector: ${label}`))

/** A plaintext that is not all one byte value, so a swapped or shifted frame cannot pass unnoticed. */
function plaintextOf(length: number): Uint8Array {
  const out = new Uint8Array(length)
  for (let i = 0; i < length; i++) out[i] = (i * 31 + (i >> 8) * 7 + 11) & 0xff
  return out
}

const KEY_A = '6f1c2b54-0b9e-4c4a-9d1e-3a5b7c9d1e2f'
const KEY_B = 'b2e4f6a8-1c3e-4a5b-8d7f-9e0a1b2c3d4e'

interface Recipe {
  name: string
  description: string
  plaintextLength: number
  context?: EncryptionContext
  frameLength?: number
  /** Wrapping keys (providerInfo) of the encrypted data keys, all of one data key. */
  keys?: string[]
  /** Turns the valid message into the negative vector. */
  tamper?: (message: Uint8Array, layout: Layout) => Uint8Array | Promise<Uint8Array>
  expectedError?: EnvelopeErrorCode
  expectedContext?: EncryptionContext
}

/** Where things are in a valid message, for the tampering. */
interface Layout {
  headerLength: number
  /** Offsets of every frame, the final one last. */
  frames: { start: number; end: number }[]
  dataKey: Uint8Array
  messageId: Uint8Array
}

function layoutOf(message: Uint8Array, frameLength: number, dataKey: Uint8Array): Layout {
  const decoded = decodeHeader(message, { maxEncryptedDataKeys: 10 })!
  const frames: Layout['frames'] = []
  let offset = decoded.length
  const view = new DataView(message.buffer, message.byteOffset)
  while (offset < message.length) {
    const final = view.getUint32(offset) === 0xffffffff
    const size = final
      ? 4 + 4 + IV_BYTES + 4 + view.getUint32(offset + 20) + 16
      : 4 + IV_BYTES + frameLength + 16
    frames.push({ start: offset, end: offset + size })
    offset += size
  }
  return { headerLength: decoded.length, frames, dataKey, messageId: decoded.header.messageId }
}

const flip = (message: Uint8Array, at: number, mask = 0x01) => {
  const out = message.slice()
  out[at]! ^= mask
  return out
}

/** A header for the same data key and message id, with its tag computed: only what the recipe changes is wrong. */
async function resealedHeader(
  layout: Layout,
  edks: EncryptedDataKey[],
  context: EncryptionContext,
  frameLength: number,
) {
  const keys = await deriveMessageKeys(layout.dataKey, layout.messageId, 'encrypt')
  const body = encodeHeaderBody({
    messageId: layout.messageId,
    context,
    encryptedDataKeys: edks,
    frameLength,
    commitment: keys.commitment,
  })
  const tag = await crypto.subtle.encrypt(
    { name: 'AES-GCM', iv: new Uint8Array(12), additionalData: body },
    keys.key,
    new Uint8Array(0),
  )
  return concatBytes([body, new Uint8Array(tag)])
}

const SEVERAL = 3 * 4096 + 100
const NON_ASCII: EncryptionContext = {
  région: 'Île-de-France',
  名前: '値',
  // U+1F600 sorts before U+FB00 by UTF-16 code units (0xD83D < 0xFB00), after it by code points.
  '😀': 'smile',
  ﬀ: 'ligature',
  'quote"and\\backslash': 'line\nbreak\u2028separator',
}

const RECIPES: Recipe[] = [
  { name: 'empty', description: 'An empty plaintext: one final frame of length 0', plaintextLength: 0 },
  { name: 'one-byte', description: 'One byte: a final frame of 1 byte', plaintextLength: 1 },
  {
    name: 'exactly-one-frame',
    description: 'Exactly the frame length (4096): the only frame is the final frame, full',
    plaintextLength: 4096,
    context: { purpose: 'test-vector' },
  },
  {
    name: 'several-frames-and-partial',
    description: 'Three regular frames, then a final frame of 100 bytes',
    plaintextLength: SEVERAL,
    context: { tenant: 'acme', bucket: 'invoices' },
  },
  {
    name: 'exact-multiple-of-frame-length',
    description:
      'Three times the frame length: two regular frames and a full final frame (never an empty one)',
    plaintextLength: 3 * 4096,
  },
  {
    name: 'non-default-frame-length',
    description: 'Frame length 128 (the minimum), 1000 bytes: seven regular frames and a final frame of 104',
    plaintextLength: 1000,
    frameLength: 128,
  },
  {
    name: 'non-ascii-context',
    description:
      'A context with non-ASCII keys and values, escapes, U+2028, and keys whose UTF-16 order differs from code point order',
    plaintextLength: 33,
    context: NON_ASCII,
  },
  {
    name: 'two-encrypted-data-keys',
    description: 'The data key wrapped under two keys; either entry decrypts it',
    plaintextLength: 300,
    keys: [KEY_A, KEY_B],
    context: { app: 'two-keys' },
  },
  {
    name: 'flipped-byte-in-regular-frame',
    description: 'One ciphertext bit of frame 2 (a regular frame) flipped',
    plaintextLength: SEVERAL,
    tamper: (m, l) => flip(m, l.frames[1]!.start + 4 + IV_BYTES + 10),
    expectedError: 'frame_authentication_failed',
  },
  {
    name: 'flipped-byte-in-final-frame',
    description: 'One ciphertext bit of the final frame flipped',
    plaintextLength: SEVERAL,
    tamper: (m, l) => flip(m, l.frames.at(-1)!.start + 24 + 5),
    expectedError: 'frame_authentication_failed',
  },
  {
    name: 'flipped-byte-in-header',
    description:
      "A context value changed in the header ('acme' to 'acmg'): still valid JSON, the header tag fails",
    plaintextLength: 50,
    context: { tenant: 'acme' },
    tamper: (m) => {
      const at = m.indexOf(0x65, 1 + 2 + 32 + 2 + 11) // the 'e' of "acme"
      return flip(m, at, 0x02)
    },
    expectedError: 'header_authentication_failed',
  },
  {
    name: 'wrong-commitment',
    description: 'One bit of the key commitment flipped',
    plaintextLength: 50,
    tamper: (m, l) => flip(m, l.headerLength - 16 - 1),
    expectedError: 'commitment_mismatch',
  },
  {
    name: 'truncated-final-frame-dropped',
    description: 'The final frame removed: the stream ends before it',
    plaintextLength: SEVERAL,
    tamper: (m, l) => m.slice(0, l.frames.at(-1)!.start),
    expectedError: 'truncated',
  },
  {
    name: 'swapped-frames',
    description: 'Regular frames 1 and 2 swapped',
    plaintextLength: SEVERAL,
    tamper: (m, l) => {
      const [a, b] = l.frames as [Layout['frames'][0], Layout['frames'][0]]
      return concatBytes([
        m.subarray(0, a.start),
        m.subarray(b.start, b.end),
        m.subarray(a.start, a.end),
        m.subarray(b.end),
      ])
    },
    expectedError: 'frame_out_of_order',
  },
  {
    name: 'trailing-data',
    description: 'One byte after the final frame',
    plaintextLength: 50,
    tamper: (m) => concatBytes([m, Uint8Array.of(0)]),
    expectedError: 'trailing_data',
  },
  {
    name: 'too-many-encrypted-data-keys',
    description:
      'A header with 11 encrypted data keys (correctly authenticated): over the default limit of 10',
    plaintextLength: 50,
    tamper: async (m, l) => {
      const edks = Array.from({ length: 11 }, (_, i) => ({
        providerId: 'kms',
        providerInfo: `00000000-0000-4000-8000-0000000000${String(i).padStart(2, '0')}`,
        encryptedDataKey: Uint8Array.of(i),
      }))
      return concatBytes([await resealedHeader(l, edks, {}, 4096), m.subarray(l.headerLength)])
    },
    expectedError: 'too_many_encrypted_data_keys',
  },
  {
    name: 'unknown-version',
    description: 'Version byte 0x02',
    plaintextLength: 10,
    tamper: (m) => flip(m, 0, 0x03),
    expectedError: 'unsupported_version',
  },
  {
    name: 'unknown-algorithm',
    description: 'Algorithm id 0x0002',
    plaintextLength: 10,
    tamper: (m) => flip(m, 2, 0x03),
    expectedError: 'unsupported_algorithm',
  },
  {
    name: 'context-mismatch',
    description: 'A valid message whose context lacks a pair the decryptor expects',
    plaintextLength: 10,
    context: { tenant: 'acme' },
    expectedContext: { tenant: 'globex' },
    expectedError: 'context_mismatch',
  },
]

async function entriesFor(recipe: Recipe): Promise<RawKeyringEntry[]> {
  const dataKey = await fixed(`data key of ${recipe.name}`)
  return Promise.all(
    (recipe.keys ?? [KEY_A]).map(async (keyId) => ({
      dataKey,
      // Opaque to the format: stands in for the service's compact envelope.
      edk: {
        providerId: 'kms',
        providerInfo: keyId,
        encryptedDataKey: (await fixed(`edk of ${recipe.name} under ${keyId}`)).subarray(0, 28),
      },
    })),
  )
}

async function encryptFixed(recipe: Recipe, entries: RawKeyringEntry[], plaintext: Uint8Array) {
  const messageId = await fixed(`message id of ${recipe.name}`)
  const stream = encryptStreamWithMessageId(
    createRawKeyring(entries),
    {
      context: recipe.context ?? {},
      frameLength: recipe.frameLength ?? 4096,
      plaintextLength: plaintext.length,
    },
    () => messageId,
  )
  const parts: Uint8Array[] = []
  const writer = stream.writable.getWriter()
  const reading = (async () => {
    for await (const part of stream.readable) parts.push(part)
  })()
  await writer.write(plaintext)
  await writer.close()
  await reading
  return concatBytes(parts)
}

/** The vectors file's content: deterministic. */
export async function buildVectors(): Promise<string> {
  const vectors = []
  for (const recipe of RECIPES) {
    const entries = await entriesFor(recipe)
    const plaintext = plaintextOf(recipe.plaintextLength)
    const frameLength = recipe.frameLength ?? 4096
    const valid = await encryptFixed(recipe, entries, plaintext)
    const message = recipe.tamper
      ? await recipe.tamper(valid, layoutOf(valid, frameLength, entries[0]!.dataKey))
      : valid
    vectors.push({
      name: recipe.name,
      description: recipe.description,
      dataKeys: entries.map((e) => ({
        providerId: e.edk.providerId,
        providerInfo: e.edk.providerInfo,
        encryptedDataKey: hex(e.edk.encryptedDataKey),
        dataKey: hex(e.dataKey),
      })),
      encryptionContext: recipe.context ?? {},
      ...(recipe.expectedContext ? { expectedContext: recipe.expectedContext } : {}),
      frameLength,
      message: base64(message),
      ...(recipe.expectedError
        ? { expectedError: recipe.expectedError }
        : plaintext.length <= 1024
          ? { plaintext: { hex: hex(plaintext) } }
          : { plaintext: { length: plaintext.length, sha256: hex(await sha256(plaintext)) } }),
    })
  }
  const manifest = {
    format: 'KMS SDK message format, version 1 (docs/sdk-message-format.md)',
    generator: 'scripts/make-sdk-vectors.ts',
    notes: [
      'message is Base64 of the whole message. dataKeys lists each encrypted data key of the header with the data key it decrypts to: a decryptor under test stands in for the keyring by looking an encrypted data key up here.',
      'A vector has either plaintext (hex, or length and sha256 for long ones) or expectedError: the decrypt error code (EnvelopeError.code) it must fail with, releasing no plaintext of the failing frame.',
      'expectedContext, when present, is passed to decrypt as the pairs the message context must hold.',
      'Decryptors read at most 10 encrypted data keys.',
    ],
    vectors,
  }
  return `${JSON.stringify(manifest, null, 2)}\n`
}

if (import.meta.main) {
  await writeFile(VECTORS_FILE, await buildVectors())
  console.log(`wrote ${VECTORS_FILE}`)
}
