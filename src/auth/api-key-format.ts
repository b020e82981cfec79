import { hash, randomInt, timingSafeEqual } from 'node:crypto'

/**
 * API keys look like `kms_<52 base62 characters>` (about 310 bits). The first 12 characters
 * after the prefix find the database row; the whole key is compared by SHA-256 hash in
 * constant time. Only the hash is stored.
 */
export const API_KEY_PREFIX = 'kms_'
const BODY_LENGTH = 52
const LOOKUP_LENGTH = 12
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
const KEY_PATTERN = new RegExp(`^${API_KEY_PREFIX}[A-Za-z0-9]{${BODY_LENGTH}}$`)

export interface NewApiKey {
  key: string
  lookupId: string
  secretHash: Buffer
}

export function generateApiKey(): NewApiKey {
  let body = ''
  for (let i = 0; i < BODY_LENGTH; i++) body += ALPHABET[randomInt(ALPHABET.length)]
  const key = API_KEY_PREFIX + body
  return { key, lookupId: body.slice(0, LOOKUP_LENGTH), secretHash: hashApiKey(key) }
}

export function hashApiKey(key: string): Buffer {
  // The one-shot hash: it runs on every request, and skips creating a Hash object.
  return hash('sha256', key, 'buffer')
}

/** The lookup id of a well-formed key, or undefined: malformed keys never reach the database. */
export function lookupIdOf(presented: string): string | undefined {
  if (!KEY_PATTERN.test(presented)) return undefined
  return presented.slice(API_KEY_PREFIX.length, API_KEY_PREFIX.length + LOOKUP_LENGTH)
}

export function apiKeyMatches(presented: string, storedHash: Buffer): boolean {
  const hash = hashApiKey(presented)
  return hash.length === storedHash.length && timingSafeEqual(hash, storedHash)
}
