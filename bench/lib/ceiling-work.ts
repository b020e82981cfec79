import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createPublicKey,
  createSecretKey,
  decapsulate,
  encapsulate,
  generateKeyPairSync,
  type KeyObject,
  randomFillSync,
  sign,
  verify,
} from 'node:crypto'

/**
 * The raw ceiling: the cryptographic work of each scenario written directly against
 * node:crypto, with no HTTP, authentication, database or audit. It deliberately does not call
 * the service's own code, so an inefficiency there shows as a lower ratio instead of lowering
 * the ceiling too. Each step mirrors what the service must do (docs/envelope-format.md), the
 * way a careful implementation does it: secret keys as KeyObjects (a Buffer key costs Node 24
 * two caught exceptions per call), nonces from a pooled random buffer.
 */
export type CeilingWork =
  | { kind: 'encrypt'; bytes: number }
  | { kind: 'decrypt'; bytes: number }
  | { kind: 'sign'; algorithm: SigningAlgorithm }
  | { kind: 'verify'; algorithm: SigningAlgorithm }
  | { kind: 'mac' }
  | { kind: 'data-key' }
  | { kind: 'create-key' }
  /** 70% encrypt/decrypt of 64 B, 20% sign/verify (ML-DSA-65 and Ed25519), 10% nothing (reads). */
  | { kind: 'mixed' }

export type SigningAlgorithm = 'ML-DSA-65' | 'Ed25519' | 'EC-P256'

const HEADER = Buffer.alloc(22, 1)
const AAD = Buffer.concat([Buffer.from('kms/envelope/v1'), HEADER])
const INFO = Buffer.concat([Buffer.from('kms/envelope/v1/dek'), HEADER, Buffer.of(1)])

/** Nonces from a pooled buffer, as a careful implementation draws them. */
function randomSource(): (n: number) => Buffer {
  const pool = Buffer.alloc(64 * 1024)
  let offset = pool.length
  return (n) => {
    if (offset + n > pool.length) {
      randomFillSync(pool)
      offset = 0
    }
    const out = Buffer.from(pool.subarray(offset, offset + n))
    offset += n
    return out
  }
}

interface Envelope {
  kemCiphertext: Buffer
  nonce: Buffer
  tag: Buffer
  ciphertext: Buffer
}

function mlKemSeal(publicKey: KeyObject, plaintext: Buffer, random: (n: number) => Buffer): Envelope {
  const { sharedKey, ciphertext: kemCiphertext } = encapsulate(publicKey)
  const dek = createSecretKey(createHmac('sha256', createSecretKey(sharedKey)).update(INFO).digest())
  const nonce = random(12)
  const cipher = createCipheriv('aes-256-gcm', dek, nonce)
  cipher.setAAD(AAD)
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return { kemCiphertext, nonce, tag: cipher.getAuthTag(), ciphertext }
}

function mlKemOpen(privateKey: KeyObject, envelope: Envelope): Buffer {
  const sharedKey = decapsulate(privateKey, envelope.kemCiphertext)
  const dek = createSecretKey(createHmac('sha256', createSecretKey(sharedKey)).update(INFO).digest())
  const decipher = createDecipheriv('aes-256-gcm', dek, envelope.nonce)
  decipher.setAAD(AAD)
  decipher.setAuthTag(envelope.tag)
  return Buffer.concat([decipher.update(envelope.ciphertext), decipher.final()])
}

const SIGNING_KEYS: Record<SigningAlgorithm, () => KeyObject> = {
  'ML-DSA-65': () => generateKeyPairSync('ml-dsa-65').privateKey,
  Ed25519: () => generateKeyPairSync('ed25519').privateKey,
  'EC-P256': () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey,
}
const DIGEST: Record<SigningAlgorithm, string | null> = {
  'ML-DSA-65': null,
  Ed25519: null,
  'EC-P256': 'sha256',
}

/** Builds one operation of the work; calling the result performs it once. */
export function prepare(work: CeilingWork): () => void {
  const random = randomSource()
  const message = Buffer.alloc(64, 7)
  switch (work.kind) {
    case 'encrypt': {
      const { publicKey } = generateKeyPairSync('ml-kem-768')
      const plaintext = Buffer.alloc(work.bytes, 7)
      return () => void mlKemSeal(publicKey, plaintext, random)
    }
    case 'decrypt': {
      const { publicKey, privateKey } = generateKeyPairSync('ml-kem-768')
      const envelope = mlKemSeal(publicKey, Buffer.alloc(work.bytes, 7), random)
      return () => void mlKemOpen(privateKey, envelope)
    }
    case 'sign': {
      const key = SIGNING_KEYS[work.algorithm]()
      const digest = DIGEST[work.algorithm]
      return () => void sign(digest, message, key)
    }
    case 'verify': {
      const key = SIGNING_KEYS[work.algorithm]()
      const digest = DIGEST[work.algorithm]
      const publicKey = createPublicKey(key)
      const signature = sign(digest, message, key)
      return () => {
        if (!verify(digest, message, publicKey, signature)) throw new Error('ceiling: signature refused')
      }
    }
    case 'mac': {
      const secret = createSecretKey(random(32))
      return () => void createHmac('sha256', secret).update(message).digest()
    }
    case 'data-key': {
      const { publicKey } = generateKeyPairSync('ml-kem-768')
      return () => {
        const dek = random(32)
        mlKemSeal(publicKey, dek, random)
      }
    }
    case 'create-key': {
      const kek = createSecretKey(random(32))
      return () => {
        const { privateKey } = generateKeyPairSync('ml-kem-768')
        const secret = privateKey.export({ format: 'der', type: 'pkcs8' })
        createPublicKey(privateKey).export({ format: 'der', type: 'spki' })
        const cipher = createCipheriv('aes-256-gcm', kek, random(12))
        cipher.update(secret)
        cipher.final()
        cipher.getAuthTag()
      }
    }
    case 'mixed': {
      const encrypt = prepare({ kind: 'encrypt', bytes: 64 })
      const decrypt = prepare({ kind: 'decrypt', bytes: 64 })
      const signMlDsa = prepare({ kind: 'sign', algorithm: 'ML-DSA-65' })
      const verifyMlDsa = prepare({ kind: 'verify', algorithm: 'ML-DSA-65' })
      // Same order of operations as the service mix, so the shares match exactly.
      const cycle = [...MIXED_CYCLE].map((op) =>
        op === 'encrypt'
          ? encrypt
          : op === 'decrypt'
            ? decrypt
            : op === 'sign'
              ? signMlDsa
              : op === 'verify'
                ? verifyMlDsa
                : () => {},
      )
      let i = 0
      return () => {
        cycle[i++ % cycle.length]!()
      }
    }
  }
}

/** One cycle of the mixed workload: 7 encrypt/decrypt, 2 sign/verify, 1 admin read per 10. */
export const MIXED_CYCLE = [
  'encrypt',
  'decrypt',
  'sign',
  'encrypt',
  'read',
  'decrypt',
  'verify',
  'encrypt',
  'decrypt',
  'encrypt',
] as const
