import { argon2, randomBytes, timingSafeEqual } from 'node:crypto'

/**
 * argon2id from node:crypto (OpenSSL 3.5), run on libuv's thread pool so the event loop never
 * waits for it. Parameters: OWASP's first recommendation (19 MiB, 2 passes, 1 lane), 16-byte
 * salt, 32-byte tag, stored as a PHC string so the parameters can be raised later and old hashes
 * still verify.
 */
export const ARGON2ID_PARAMS = {
  memoryKiB: 19_456,
  passes: 2,
  parallelism: 1,
  saltBytes: 16,
  tagBytes: 32,
} as const

/** Longer passwords cost nothing more to hash (argon2 pre-hashes), but bound what a form may carry. */
export const MAX_PASSWORD_LENGTH = 256

const PHC =
  /^\$argon2id\$v=19\$m=(\d{1,7}),t=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]{16,88})\$([A-Za-z0-9+/]{16,172})$/

function derive(
  password: string,
  salt: Buffer,
  memory: number,
  passes: number,
  parallelism: number,
  tagLength: number,
): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    argon2(
      'argon2id',
      { message: Buffer.from(password, 'utf8'), nonce: salt, memory, passes, parallelism, tagLength },
      (err, tag) => (err ? reject(err) : resolve(Buffer.from(tag))),
    ),
  )
}

const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '')

export async function hashPassword(password: string): Promise<string> {
  const { memoryKiB, passes, parallelism, saltBytes, tagBytes } = ARGON2ID_PARAMS
  const salt = randomBytes(saltBytes)
  const tag = await derive(password, salt, memoryKiB, passes, parallelism, tagBytes)
  return `$argon2id$v=19$m=${memoryKiB},t=${passes},p=${parallelism}$${b64(salt)}$${b64(tag)}`
}

/** Constant-time comparison of the derived tag. A malformed stored hash verifies nothing. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const match = PHC.exec(stored)
  if (!match) return false
  const [, m, t, p, saltText, tagText] = match
  const expected = Buffer.from(tagText!, 'base64')
  const tag = await derive(
    password,
    Buffer.from(saltText!, 'base64'),
    Number(m),
    Number(t),
    Number(p),
    expected.length,
  )
  return timingSafeEqual(tag, expected)
}

/**
 * A hash of a fixed random password with the current parameters: verifying against it when an
 * account does not exist costs the same as for one that does, so timing reveals nothing.
 */
let decoy: Promise<string> | undefined
export const decoyHash = (): Promise<string> => {
  decoy ??= hashPassword(randomBytes(16).toString('hex'))
  return decoy
}
