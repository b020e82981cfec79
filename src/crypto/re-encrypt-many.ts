import type { EnvelopeKey, SealedEnvelope } from './envelope.ts'
import { type OpenItem, openMany, type SealItem, sealMany } from './envelope-batch.ts'

/**
 * Re-encryption of envelopes, a pure function of its inputs like envelope-batch.ts: the same code
 * runs inline (a single /re-encrypt, a small batch) and in a crypto pool thread (a batch's
 * chunks), so the plaintext exists only inside the one function that opens and seals, on the
 * thread doing the work, and is zeroed there at once: it never crosses to another thread, and
 * never reaches the request's handler.
 */
export interface ReEncryptItem {
  /** The envelope and its source key (an index into the key list), as a decrypt batch item. */
  open: OpenItem
  /** The destination, as an encrypt batch item without its plaintext. */
  seal: Omit<SealItem, 'plaintext'>
}

/** The destination envelope per item; null for an item that does not open (decryption_failed). */
export function reEncryptMany(
  keys: readonly EnvelopeKey[],
  items: readonly ReEncryptItem[],
): (SealedEnvelope | null)[] {
  return items.map((item) => {
    const [plaintext] = openMany(keys, [item.open])
    if (!plaintext) return null
    try {
      return sealMany(keys, [{ ...item.seal, plaintext }])[0]!
    } finally {
      plaintext.fill(0)
    }
  })
}
