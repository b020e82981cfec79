import { hash, randomInt, timingSafeEqual } from 'node:crypto'

/**
 * Secret keys look like `<prefix><52 base62 characters>` (about 310 bits). The first 12
 * characters after the prefix find the database row; the whole key is compared by SHA-256 hash
 * in constant time. Only the hash is stored. Tenants' API keys use `kms_`; partners' `kmsp_`
 * (src/partners), so neither is ever taken for the other.
 */
const API_KEY_PREFIX = 'kms_'
const BODY_LENGTH = 52
const LOOKUP_LENGTH = 12
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

export interface NewApiKey {
  key: string
  lookupId: string
  secretHash: Buffer
}

export interface SecretKeyFormat {
  generate(): NewApiKey
  /** The lookup id of a well-formed key, or undefined: malformed keys never reach the database. */
  lookupIdOf(presented: string): string | undefined
  matches(presented: string, storedHash: Buffer): boolean
}

function hashApiKey(key: string): Buffer {
  // The one-shot hash: it runs on every request, and skips creating a Hash object.
  return hash('sha256', key, 'buffer')
}

export function secretKeyFormat(prefix: string): SecretKeyFormat {
  const pattern = new RegExp(`^${prefix}[A-Za-z0-9]{${BODY_LENGTH}}$`)
  return {
    generate() {
      let body = ''
      for (let i = 0; i < BODY_LENGTH; i++) body += ALPHABET[randomInt(ALPHABET.length)]
      const key = prefix + body
      return { key, lookupId: body.slice(0, LOOKUP_LENGTH), secretHash: hashApiKey(key) }
    },
    lookupIdOf(presented) {
      if (!pattern.test(presented)) return undefined
      return presented.slice(prefix.length, prefix.length + LOOKUP_LENGTH)
    },
    matches(presented, storedHash) {
      const presentedHash = hashApiKey(presented)
      return presentedHash.length === storedHash.length && timingSafeEqual(presentedHash, storedHash)
    },
  }
}

/**
 * Equal strings, compared in time that depends on their length only (never on where they first
 * differ): every character is compared, with no early exit. For a presented key against one
 * already verified (api-key-authenticator.ts); both are ASCII keys of the same fixed length.
 */
export function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return difference === 0
}

const tenantKeys = secretKeyFormat(API_KEY_PREFIX)
export const generateApiKey = (): NewApiKey => tenantKeys.generate()
export const lookupIdOf = (presented: string): string | undefined => tenantKeys.lookupIdOf(presented)
export const apiKeyMatches = (presented: string, storedHash: Buffer): boolean =>
  tenantKeys.matches(presented, storedHash)
