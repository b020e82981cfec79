import type { Module } from '../platform/module.ts'
import { batchRoutes } from './batch-routes.ts'
import type { BatchService } from './batch-service.ts'
import { cryptoRoutes } from './crypto-routes.ts'
import type { CryptoService } from './crypto-service.ts'
import { dataKeyRoutes } from './data-key-routes.ts'
import { rawAesRoutes } from './raw-aes-routes.ts'
import type { RawAesService } from './raw-aes-service.ts'
import { reEncryptRoutes } from './re-encrypt-routes.ts'
import type { ReEncryptService } from './re-encrypt-service.ts'
import { signingRoutes } from './signing-routes.ts'
import type { SigningService } from './signing-service.ts'

/** The data plane: encryption, re-encryption, MACs, signatures, data keys, batches, random bytes. */
export function cryptoModule(deps: {
  crypto: CryptoService
  signing: SigningService
  batches: BatchService
  reEncrypt: ReEncryptService
  rawAes: RawAesService
}): Module {
  return {
    name: 'crypto',
    dataPlane: [
      ...cryptoRoutes(deps.crypto),
      ...batchRoutes(deps.batches),
      ...signingRoutes(deps.signing),
      ...dataKeyRoutes(deps.crypto),
      ...reEncryptRoutes(deps.reEncrypt),
      ...rawAesRoutes(deps.rawAes),
    ],
  }
}
