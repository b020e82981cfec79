import { AppError } from './errors.ts'

/**
 * Strict standard Base64 (RFC 4648 §4, padded). Checked without a backtracking pattern: the
 * grouped regex this replaces overflowed the regex engine's stack on multi-megabyte input.
 */
export function isStrictBase64(text: string): boolean {
  if (text.length % 4 !== 0) return false
  return /^[A-Za-z0-9+/]*={0,2}$/.test(text)
}

/** Decodes a Base64 request field, or answers 400 naming the field. */
export function decodeBase64Field(value: string, field: string): Buffer {
  if (!isStrictBase64(value)) {
    throw new AppError(400, 'validation_failed', `${field} must be standard Base64`, {
      fields: [{ path: field, message: 'must be standard Base64' }],
    })
  }
  return Buffer.from(value, 'base64')
}
