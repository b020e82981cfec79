import { Type } from 'typebox'

/** Spec section 2.1: every algorithm, the key types it serves and how it is made. */
const KEY_TYPES = ['Encryption', 'Signing', 'HMAC'] as const
export type KeyType = (typeof KEY_TYPES)[number]

export const ALGORITHM_NAMES = [
  'ML-KEM-512',
  'ML-KEM-768',
  'ML-KEM-1024',
  'ML-DSA-44',
  'ML-DSA-65',
  'ML-DSA-87',
  'SLH-DSA-128s',
  'RSA-2048',
  'RSA-3072',
  'RSA-4096',
  'EC-P256',
  'EC-P384',
  'EC-P521',
  'Ed25519',
  'HMAC-SHA256',
  'HMAC-SHA384',
  'HMAC-SHA512',
  'AES-128-GCM',
  'AES-192-GCM',
  'AES-256-GCM',
  'X-Wing',
] as const
export type AlgorithmName = (typeof ALGORITHM_NAMES)[number]

export const KeyTypeSchema = Type.Enum(KEY_TYPES, { description: 'Key type (spec 2.1)' })
export const AlgorithmSchema = Type.Enum(ALGORITHM_NAMES, { description: 'Algorithm (spec 2.1)' })

/** How node:crypto names and builds the key; `secretBytes` marks a symmetric (HMAC) key. */
export type NodeKeySpec =
  | { kind: 'ml-kem-512' | 'ml-kem-768' | 'ml-kem-1024' }
  | { kind: 'ml-dsa-44' | 'ml-dsa-65' | 'ml-dsa-87' }
  | { kind: 'slh-dsa-sha2-128s' }
  | { kind: 'rsa'; modulusLength: 2048 | 3072 | 4096 }
  | { kind: 'ec'; namedCurve: 'P-256' | 'P-384' | 'P-521'; opensslCurve: string }
  | { kind: 'ed25519' }
  | { kind: 'hmac'; hash: 'sha256' | 'sha384' | 'sha512'; secretBytes: number; blockBytes: number }
  | { kind: 'aes-gcm'; secretBytes: 16 | 24 | 32 }
  /** ML-KEM-768 + X25519 (src/crypto/xwing.ts): not a node key type, built from its seed. */
  | { kind: 'x-wing' }

/** Symmetric algorithms: the key is one secret (HMAC, AES), with no public part. */
export const isSymmetric = (spec: NodeKeySpec): spec is Extract<NodeKeySpec, { secretBytes: number }> =>
  spec.kind === 'hmac' || spec.kind === 'aes-gcm'

export interface Algorithm {
  name: AlgorithmName
  keyTypes: readonly KeyType[]
  isPostQuantum: boolean
  spec: NodeKeySpec
  /** JOSE `alg` of the public JWK per key type, where one is registered. */
  jwkAlg: Partial<Record<KeyType, string>>
}

const ALGORITHM_LIST: readonly Algorithm[] = [
  ...(['512', '768', '1024'] as const).map(
    (size): Algorithm => ({
      name: `ML-KEM-${size}`,
      keyTypes: ['Encryption'],
      isPostQuantum: true,
      spec: { kind: `ml-kem-${size}` },
      jwkAlg: { Encryption: `ML-KEM-${size}` },
    }),
  ),
  ...(['44', '65', '87'] as const).map(
    (level): Algorithm => ({
      name: `ML-DSA-${level}`,
      keyTypes: ['Signing'],
      isPostQuantum: true,
      spec: { kind: `ml-dsa-${level}` },
      jwkAlg: { Signing: `ML-DSA-${level}` },
    }),
  ),
  {
    name: 'SLH-DSA-128s',
    keyTypes: ['Signing'],
    isPostQuantum: true,
    spec: { kind: 'slh-dsa-sha2-128s' },
    jwkAlg: { Signing: 'SLH-DSA-SHA2-128s' },
  },
  ...([2048, 3072, 4096] as const).map(
    (bits): Algorithm => ({
      name: `RSA-${bits}`,
      keyTypes: ['Encryption', 'Signing'],
      isPostQuantum: false,
      spec: { kind: 'rsa', modulusLength: bits },
      // DESIGN: RSA encrypts with OAEP-SHA256 and signs with PSS-SHA256 by default.
      jwkAlg: { Encryption: 'RSA-OAEP-256', Signing: 'PS256' },
    }),
  ),
  ...(
    [
      ['P256', 'P-256', 'prime256v1', 'ES256'],
      ['P384', 'P-384', 'secp384r1', 'ES384'],
      ['P521', 'P-521', 'secp521r1', 'ES512'],
    ] as const
  ).map(
    ([suffix, namedCurve, opensslCurve, alg]): Algorithm => ({
      name: `EC-${suffix}`,
      keyTypes: ['Signing'],
      isPostQuantum: false,
      spec: { kind: 'ec', namedCurve, opensslCurve },
      jwkAlg: { Signing: alg },
    }),
  ),
  {
    name: 'Ed25519',
    keyTypes: ['Signing'],
    isPostQuantum: false,
    spec: { kind: 'ed25519' },
    jwkAlg: { Signing: 'EdDSA' },
  },
  ...(
    [
      ['256', 32, 64],
      ['384', 48, 128],
      ['512', 64, 128],
    ] as const
  ).map(
    ([bits, secretBytes, blockBytes]): Algorithm => ({
      name: `HMAC-SHA${bits}`,
      keyTypes: ['HMAC'],
      isPostQuantum: false,
      spec: { kind: 'hmac', hash: `sha${bits}`, secretBytes, blockBytes },
      jwkAlg: { HMAC: `HS${bits}` },
    }),
  ),
  ...([128, 192, 256] as const).map(
    (bits): Algorithm => ({
      name: `AES-${bits}-GCM`,
      keyTypes: ['Encryption'],
      // AES-256 keeps 128-bit security against Grover's search (CNSA 2.0 lists it); the smaller
      // sizes serve imported keys and interoperability.
      isPostQuantum: bits === 256,
      spec: { kind: 'aes-gcm', secretBytes: (bits / 8) as 16 | 24 | 32 },
      jwkAlg: { Encryption: `A${bits}GCM` },
    }),
  ),
  {
    // draft-connolly-cfrg-xwing-kem: a hybrid of ML-KEM-768 and X25519, secure while either holds.
    name: 'X-Wing',
    keyTypes: ['Encryption'],
    isPostQuantum: true,
    spec: { kind: 'x-wing' },
    // No JOSE registration: no JWK form.
    jwkAlg: {},
  },
]

const BY_NAME = new Map<string, Algorithm>(ALGORITHM_LIST.map((a) => [a.name, a]))

export function algorithmByName(name: AlgorithmName): Algorithm {
  const found = BY_NAME.get(name)
  if (!found) throw new Error(`unknown algorithm ${name}`)
  return found
}

/** Table 2.1's defaults; HMAC has none, so its algorithm must be named. */
export const DEFAULT_ALGORITHM: Partial<Record<KeyType, AlgorithmName>> = {
  Encryption: 'ML-KEM-768',
  Signing: 'ML-DSA-65',
}

export function algorithmsFor(keyType: KeyType): AlgorithmName[] {
  return ALGORITHM_LIST.filter((a) => a.keyTypes.includes(keyType)).map((a) => a.name)
}
