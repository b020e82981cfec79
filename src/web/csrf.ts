import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'
import type { MasterKey, MasterKeyring } from '../keyring/master-key.ts'
import { esc } from './layout.ts'

export const CSRF_COOKIE = 'kms_csrf'
export const CSRF_FIELD = 'csrf'

/**
 * Double-submit CSRF protection for the pages' forms: a random value in an HttpOnly, SameSite=Strict
 * cookie, and in each form a MAC of that value and the form's purpose (so a token for one form is
 * not one for another). A cross-site page can neither read the cookie nor compute the MAC. The MAC
 * key is derived from the master keyring, so every process accepts every other's forms: made with
 * the primary key, checked with each key of the keyring, so a form shown before a master key
 * rotation (or by a process that has not yet seen it) still goes through until the old key is dropped.
 */
export interface Csrf {
  /** The cookie value to keep (the request's, or a new one) and the token for the form. */
  issue(
    cookieValue: string | undefined,
    purpose: string,
  ): { cookieValue: string; token: string; fresh: boolean }
  check(cookieValue: string | undefined, purpose: string, token: unknown): boolean
}

const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}$/

export function createCsrf(masterKeys: MasterKeyring): Csrf {
  const derived = new Map<string, Buffer>()
  const keyOf = (master: MasterKey) => {
    let key = derived.get(master.id)
    if (!key) {
      key = Buffer.from(hkdfSync('sha256', master.key.export(), Buffer.alloc(0), 'kms page csrf v1', 32))
      derived.set(master.id, key)
    }
    return key
  }
  const mac = (key: Buffer, value: string, purpose: string) =>
    createHmac('sha256', key).update(`${purpose}\u0000${value}`).digest()
  return {
    issue(cookieValue, purpose) {
      const fresh = !cookieValue || !COOKIE_VALUE.test(cookieValue)
      const value = fresh ? randomBytes(32).toString('base64url') : cookieValue
      const token = mac(keyOf(masterKeys.primary), value, purpose).toString('base64url')
      return { cookieValue: value, token, fresh }
    },
    check(cookieValue, purpose, token) {
      if (!cookieValue || !COOKIE_VALUE.test(cookieValue) || typeof token !== 'string' || token.length !== 43)
        return false
      const given = Buffer.from(token, 'base64url')
      return masterKeys.all.some((master) => {
        const expected = mac(keyOf(master), cookieValue, purpose)
        return given.length === expected.length && timingSafeEqual(given, expected)
      })
    },
  }
}

/** One cookie's value from the request (the pages need two cookies; no cookie plugin for that). */
export function cookieOf(
  request: { headers: { cookie?: string | undefined } },
  name: string,
): string | undefined {
  const header = request.headers.cookie
  if (!header || header.length > 8192) return undefined
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

/**
 * A form's hidden CSRF field for `purpose`; sets the cookie on the reply when the browser has none
 * (or a malformed one) yet. Every page form uses this.
 */
export function csrfField(
  csrf: Csrf,
  request: { headers: { cookie?: string | undefined }; protocol: string },
  reply: { header(name: string, value: string): unknown },
  purpose: string,
): string {
  const issued = csrf.issue(cookieOf(request, CSRF_COOKIE), purpose)
  if (issued.fresh)
    reply.header(
      'set-cookie',
      `${CSRF_COOKIE}=${issued.cookieValue}; Path=/; HttpOnly; SameSite=Strict${request.protocol === 'https' ? '; Secure' : ''}`,
    )
  return `<input type="hidden" name="${CSRF_FIELD}" value="${esc(issued.token)}">`
}
