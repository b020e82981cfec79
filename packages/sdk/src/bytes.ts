/** Byte helpers over Uint8Array alone (no Buffer: the SDK runs in browsers too). */

/** A Uint8Array WebCrypto takes: its buffer an ArrayBuffer (a SharedArrayBuffer view is copied). */
export function webBytes(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  if (typeof SharedArrayBuffer !== 'undefined' && bytes.buffer instanceof SharedArrayBuffer)
    return bytes.slice()
  return bytes as Uint8Array<ArrayBuffer>
}

export function concatBytes(parts: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  let length = 0
  for (const part of parts) length += part.length
  const out = new Uint8Array(length)
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}

/** Compares in time that depends on the length only (commitments, tags). */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!
  return diff === 0
}

const utf8Encoder = new TextEncoder()
export const utf8 = (text: string): Uint8Array<ArrayBuffer> => utf8Encoder.encode(text)

/** Standard Base64 (the API's encoding of binary fields). */
export function toBase64(bytes: Uint8Array): string {
  let binary = ''
  // Chunked: String.fromCharCode takes its arguments on the stack.
  for (let i = 0; i < bytes.length; i += 0x8000)
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(binary)
}

export function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text)
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}

/** Big-endian writer of the message header. */
export class ByteWriter {
  private parts: Uint8Array[] = []

  u8(value: number): this {
    this.parts.push(Uint8Array.of(value))
    return this
  }

  u16(value: number): this {
    const out = new Uint8Array(2)
    new DataView(out.buffer).setUint16(0, value)
    this.parts.push(out)
    return this
  }

  u32(value: number): this {
    const out = new Uint8Array(4)
    new DataView(out.buffer).setUint32(0, value)
    this.parts.push(out)
    return this
  }

  bytes(value: Uint8Array): this {
    this.parts.push(value)
    return this
  }

  /** u16 length, then the bytes. */
  lengthPrefixed(value: Uint8Array): this {
    return this.u16(value.length).bytes(value)
  }

  finish(): Uint8Array<ArrayBuffer> {
    return concatBytes(this.parts)
  }
}

/**
 * The bytes received and not consumed yet, as the chunks they came in: taking a frame copies it
 * once when it straddles chunks, and not at all when one chunk holds it.
 */
export class ByteQueue {
  private chunks: Uint8Array[] = []
  private head = 0
  length = 0

  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return
    this.chunks.push(chunk)
    this.length += chunk.length
  }

  /** The first `n` bytes (n <= length), without consuming them. */
  peek(n: number): Uint8Array {
    const first = this.chunks[0]
    if (first && first.length - this.head >= n) return first.subarray(this.head, this.head + n)
    const out = new Uint8Array(n)
    let filled = 0
    let head = this.head
    for (const chunk of this.chunks) {
      const take = Math.min(n - filled, chunk.length - head)
      out.set(chunk.subarray(head, head + take), filled)
      filled += take
      head = 0
      if (filled === n) break
    }
    return out
  }

  /** Consumes and returns the first `n` bytes (n <= length). */
  take(n: number): Uint8Array {
    const out = this.peek(n)
    this.length -= n
    let left = n
    while (left > 0) {
      const first = this.chunks[0]!
      const available = first.length - this.head
      if (available > left) {
        this.head += left
        break
      }
      left -= available
      this.chunks.shift()
      this.head = 0
    }
    return out
  }
}
