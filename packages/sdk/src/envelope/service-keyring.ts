import { fromBase64, toBase64 } from '../bytes.ts'
import type { KmsClient } from '../client.ts'
import { dataOf, KmsError } from '../errors.ts'
import type { EncryptionContext } from './context.ts'
import type { DataKeyFailure } from './errors.ts'
import { DATA_KEY_BYTES, type EncryptedDataKey, PROVIDER_ID_KMS } from './format.ts'
import { type Keyring, noDecryptableDataKey } from './keyring.ts'

export interface ServiceKeyringOptions {
  /**
   * The service's keys, by id or alias (`alias/<name>`): the data key comes from the first and is
   * wrapped under each of the others, so any one of them decrypts the message. May be empty with
   * `discovery` (a keyring that only decrypts).
   */
  keyIds: readonly string[]
  /**
   * Decrypt tries every `kms` encrypted data key of a message, whatever its key (the service
   * still decides what the caller may use). Default false: only those of `keyIds`.
   */
  discovery?: boolean
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Answers that mean "not with this key": the next encrypted data key may still open. */
function isSkippable(error: KmsError): boolean {
  return (
    error.status === 403 ||
    error.status === 404 ||
    error.code === 'decryption_failed' ||
    error.code === 'key_state_conflict' ||
    // The alias path names another key than the encrypted data key's (the body's keyId cross-check).
    (error.status === 400 && error.fields.some((f) => f.path === 'body/keyId'))
  )
}

const failure = (edk: EncryptedDataKey, error: KmsError): DataKeyFailure => ({
  providerId: edk.providerId,
  providerInfo: edk.providerInfo,
  status: error.status,
  code: error.code,
  message: error.message,
})

function dataKeyOf(base64: string | undefined): Uint8Array {
  const dataKey = fromBase64(base64 ?? '')
  if (dataKey.length !== DATA_KEY_BYTES)
    throw new KmsError({
      status: 0,
      code: 'invalid_response',
      message: `The service answered a data key of ${dataKey.length} bytes where ${DATA_KEY_BYTES} were asked for`,
    })
  return dataKey
}

/**
 * A keyring over the service's keys: data keys from POST /keys/{keyId}/data-key (32 bytes, the
 * message's context bound), wrapped further with POST /keys/{keyId}/wrap, recovered with POST
 * /keys/{keyId}/unwrap. A data key never leaves this process other than wrapped.
 */
export function createServiceKeyring(client: KmsClient, options: ServiceKeyringOptions): Keyring {
  const keyIds = [...options.keyIds]
  if (
    (keyIds.length === 0 && !options.discovery) ||
    keyIds.some((k) => typeof k !== 'string' || k.length === 0)
  )
    throw new TypeError('keyIds must name at least one key (an id or alias/<name>), or discovery be on')
  if (keyIds.length > 10) throw new TypeError(`keyIds may name at most 10 keys (names ${keyIds.length})`)
  const ids = new Set(keyIds.filter((k) => UUID.test(k)).map((k) => k.toLowerCase()))
  const aliases = keyIds.filter((k) => !UUID.test(k))

  async function unwrap(path: string, edk: EncryptedDataKey, context: EncryptionContext) {
    const answer = await dataOf(
      client.api.POST('/api/v1/keys/{keyId}/unwrap', {
        params: { path: { keyId: path } },
        body: {
          encryptedDek: toBase64(edk.encryptedDataKey),
          context,
          // With an alias path, the service checks that the alias names this key (400 otherwise).
          ...(path === edk.providerInfo ? {} : { keyId: edk.providerInfo }),
        },
      }),
    )
    return dataKeyOf(answer.plaintext)
  }

  return {
    async generateDataKey(context) {
      const [first, ...others] = keyIds
      if (first === undefined)
        throw new TypeError('This keyring names no key to make a data key with (keyIds is empty)')
      const generated = await dataOf(
        client.api.POST('/api/v1/keys/{keyId}/data-key', {
          params: { path: { keyId: first! } },
          body: { keyBytes: 32, withPlaintext: true, context },
        }),
      )
      const dataKey = dataKeyOf(generated.plaintextDek)
      const plaintext = toBase64(dataKey)
      const wrapped = await Promise.all(
        others.map((keyId) =>
          dataOf(
            client.api.POST('/api/v1/keys/{keyId}/wrap', {
              params: { path: { keyId } },
              body: { plaintext, context },
            }),
          ),
        ),
      )
      const edk = (keyId: string, base64: string): EncryptedDataKey => ({
        providerId: PROVIDER_ID_KMS,
        providerInfo: keyId,
        encryptedDataKey: fromBase64(base64),
      })
      return {
        dataKey,
        encryptedDataKeys: [
          edk(generated.keyId, generated.encryptedDek),
          ...wrapped.map((w) => edk(w.keyId, w.wrappedKey)),
        ],
      }
    },

    async decryptDataKey(encryptedDataKeys, context) {
      const reasons: DataKeyFailure[] = []
      for (const edk of encryptedDataKeys) {
        if (edk.providerId !== PROVIDER_ID_KMS || !UUID.test(edk.providerInfo)) {
          reasons.push({
            providerId: edk.providerId,
            providerInfo: edk.providerInfo,
            code: 'not_a_service_key',
            message: 'Not wrapped by a key of the service',
          })
          continue
        }
        const paths =
          options.discovery || ids.has(edk.providerInfo.toLowerCase()) ? [edk.providerInfo] : aliases
        if (paths.length === 0) {
          reasons.push({
            providerId: edk.providerId,
            providerInfo: edk.providerInfo,
            code: 'not_in_keyring',
            message: "Wrapped by a key that is not one of the keyring's keys",
          })
          continue
        }
        for (const path of paths) {
          try {
            return await unwrap(path, edk, context)
          } catch (error) {
            if (!(error instanceof KmsError) || !isSkippable(error)) throw error
            reasons.push(failure(edk, error))
          }
        }
      }
      throw noDecryptableDataKey(reasons)
    },
  }
}
