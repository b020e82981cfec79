import {
  EnvelopeError,
  type EnvelopeHeader,
  type EnvelopeKey,
  type EnvelopePurpose,
  openEnvelope,
  type SealedEnvelope,
  sealEnvelope,
} from './envelope.ts'

/**
 * Many envelopes at once, for batches: pure functions of their inputs, so the same code runs
 * inline for a few items and in the crypto pool's worker threads for chunks. Randomness is
 * drawn on the main thread (from the entropy chain) and passed in with each item.
 */
export interface SealItem {
  /** Index into the chunk's key list. */
  key: number
  purpose: EnvelopePurpose
  header: EnvelopeHeader
  plaintext: Uint8Array
  context: Uint8Array
  /** Every random byte the item needs (nonce, and the DEK for RSA), in the order drawn. */
  random: Uint8Array
}

export interface OpenItem {
  key: number
  purpose: EnvelopePurpose
  envelope: { [P in keyof SealedEnvelope]: Uint8Array }
  context: Uint8Array
}

const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

export function sealMany(keys: readonly EnvelopeKey[], items: readonly SealItem[]): SealedEnvelope[] {
  return items.map((item) => {
    const random = asBuffer(item.random)
    let used = 0
    return sealEnvelope({
      purpose: item.purpose,
      header: item.header,
      key: keys[item.key]!,
      plaintext: asBuffer(item.plaintext),
      context: asBuffer(item.context),
      random(length) {
        const out = random.subarray(used, used + length)
        used += length
        if (out.length !== length) throw new Error('not enough random bytes passed for the item')
        return out
      },
    })
  })
}

/** Null for an item that does not open (the one undifferentiated failure). */
export function openMany(keys: readonly EnvelopeKey[], items: readonly OpenItem[]): (Buffer | null)[] {
  return items.map((item) => {
    try {
      return openEnvelope({
        purpose: item.purpose,
        privateKey: keys[item.key]!,
        context: asBuffer(item.context),
        envelope: {
          ciphertext: asBuffer(item.envelope.ciphertext),
          encapsulatedKey: asBuffer(item.envelope.encapsulatedKey),
          nonce: asBuffer(item.envelope.nonce),
          tag: asBuffer(item.envelope.tag),
        },
      })
    } catch (error) {
      if (error instanceof EnvelopeError) return null
      throw error
    }
  })
}

/**
 * Results cross the thread boundary packed in one buffer: structured clone copies a view's
 * whole ArrayBuffer, and small Buffers live in shared 8 KiB pool slabs.
 */
export interface PackedBuffers {
  packed: Uint8Array
  /** End offset of each part; -1 marks an absent part (an item that failed). */
  ends: number[]
}

export function packBuffers(parts: readonly (Buffer | null)[]): PackedBuffers {
  const ends: number[] = []
  let end = 0
  for (const part of parts) {
    if (part) end += part.length
    ends.push(part ? end : -1)
  }
  const packed = Buffer.allocUnsafeSlow(end)
  let at = 0
  for (const part of parts) {
    if (!part) continue
    part.copy(packed, at)
    at += part.length
  }
  return { packed, ends }
}

export function unpackBuffers({ packed, ends }: PackedBuffers): (Buffer | null)[] {
  const bytes = asBuffer(packed)
  let start = 0
  return ends.map((end) => {
    if (end < 0) return null
    const part = bytes.subarray(start, end)
    start = end
    return part
  })
}
