export { createKmsClient, type KmsClient, type KmsClientOptions } from './client.ts'
export { type CachingKeyringOptions, createCachingKeyring } from './envelope/caching-keyring.ts'
export type { EncryptionContext } from './envelope/context.ts'
export {
  type DecryptedHeader,
  type DecryptOptions,
  type DecryptStream,
  decryptStream,
} from './envelope/decrypt.ts'
export { type EncryptOptions, encryptStream } from './envelope/encrypt.ts'
export { type DataKeyFailure, EnvelopeError, type EnvelopeErrorCode } from './envelope/errors.ts'
export type { EncryptedDataKey } from './envelope/format.ts'
export {
  createRawKeyring,
  type DataKeyMaterial,
  type DataKeyUsage,
  type Keyring,
  type RawKeyringEntry,
} from './envelope/keyring.ts'
export { createServiceKeyring, type ServiceKeyringOptions } from './envelope/service-keyring.ts'
export { decrypt, encrypt } from './envelope/whole.ts'
export {
  type ClientErrorCode,
  dataOf,
  errorFromResponse,
  type FieldError,
  KmsError,
  type ServiceErrorCode,
} from './errors.ts'
export type { components, operations, paths } from './schema.ts'
