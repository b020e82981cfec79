/**
 * Base64 as the API has it on the wire (standard, padded), from and to the UTF-8 text a person
 * types and reads.
 */

function bytesToBase64(bytes: Uint8Array): string {
  let binary = ''
  for (let start = 0; start < bytes.length; start += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(start, start + 0x8000))
  }
  return btoa(binary)
}

export const textToBase64 = (text: string) => bytesToBase64(new TextEncoder().encode(text))

/** The bytes of a Base64 text, or undefined when it is not Base64. */
function base64ToBytes(base64: string): Uint8Array | undefined {
  try {
    const binary = atob(base64.replace(/\s+/g, ''))
    return Uint8Array.from(binary, (char) => char.charCodeAt(0))
  } catch {
    return undefined
  }
}

/** The UTF-8 text of Base64 bytes, or undefined when they are not UTF-8 text. */
export function base64ToText(base64: string): string | undefined {
  const bytes = base64ToBytes(base64)
  if (!bytes) return undefined
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    return undefined
  }
}
