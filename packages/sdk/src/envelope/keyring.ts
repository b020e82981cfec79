import { constantTimeEqual } from '../bytes.ts'
import type { EncryptionContext } from './context.ts'
import { type DataKeyFailure, EnvelopeError } from './errors.ts'
import { DATA_KEY_BYTES, type EncryptedDataKey } from './format.ts'

export interface DataKeyMaterial {
  /** 32 bytes: the message's data key, in plaintext. Use it for one message (or what a cache allows) and drop it. */
  dataKey: Uint8Array
  /** The data key wrapped, one per wrapping key, for the header. */
  encryptedDataKeys: EncryptedDataKey[]
}

/** What encrypt says of the message it wants a data key for (for a caching keyring's bounds). */
export interface DataKeyUsage {
  /** The plaintext's length in bytes, when known (undefined for a stream of unstated size). */
  plaintextLength?: number | undefined
}

/** Where data keys come from and how they are recovered. */
export interface Keyring {
  /** A fresh data key for a message with this context, and its encrypted data keys. */
  generateDataKey(context: EncryptionContext, usage?: DataKeyUsage): Promise<DataKeyMaterial>
  /**
   * The data key from one of a message's encrypted data keys, for its context; an EnvelopeError
   * no_decryptable_data_key (with the reasons, never key material) when none opens.
   */
  decryptDataKey(
    encryptedDataKeys: readonly EncryptedDataKey[],
    context: EncryptionContext,
  ): Promise<Uint8Array>
}

export interface RawKeyringEntry {
  /** The encrypted data key as a header carries it (its bytes are opaque to this keyring). */
  edk: EncryptedDataKey
  dataKey: Uint8Array
}

export const noDecryptableDataKey = (reasons: DataKeyFailure[]) =>
  new EnvelopeError(
    'no_decryptable_data_key',
    reasons.length === 0
      ? 'The message has no encrypted data key this keyring can decrypt'
      : `No encrypted data key could be decrypted: ${reasons
          .map((r) => `${r.providerInfo}: ${r.status ? `${r.status} ` : ''}${r.code}`)
          .join('; ')}`,
    { reasons },
  )

const sameEdk = (a: EncryptedDataKey, b: EncryptedDataKey) =>
  a.providerId === b.providerId &&
  a.providerInfo === b.providerInfo &&
  constantTimeEqual(a.encryptedDataKey, b.encryptedDataKey)

/**
 * A keyring over fixed data keys, for test vectors and tests only: it generates the one data
 * key of its entries (all must share it) with every entry's encrypted data key, and decrypts an
 * encrypted data key by finding it among its entries. No service is involved, so the context is
 * bound only by the message itself.
 */
export function createRawKeyring(entries: readonly RawKeyringEntry[]): Keyring {
  if (entries.length === 0) throw new TypeError('createRawKeyring needs at least one entry')
  for (const entry of entries)
    if (entry.dataKey.length !== DATA_KEY_BYTES)
      throw new TypeError(
        `each entry's dataKey must be ${DATA_KEY_BYTES} bytes (one has ${entry.dataKey.length})`,
      )
  const first = entries[0]!
  return {
    async generateDataKey() {
      if (!entries.every((e) => constantTimeEqual(e.dataKey, first.dataKey)))
        throw new TypeError('a raw keyring generates only when all its entries share one data key')
      return { dataKey: first.dataKey.slice(), encryptedDataKeys: entries.map((e) => e.edk) }
    },
    async decryptDataKey(encryptedDataKeys) {
      const reasons: DataKeyFailure[] = []
      for (const edk of encryptedDataKeys) {
        const entry = entries.find((e) => sameEdk(e.edk, edk))
        if (entry) return entry.dataKey.slice()
        reasons.push({
          providerId: edk.providerId,
          providerInfo: edk.providerInfo,
          code: 'unknown_encrypted_data_key',
          message: 'Not one of the raw keyring entries',
        })
      }
      throw noDecryptableDataKey(reasons)
    },
  }
}
