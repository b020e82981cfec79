/**
 * A minimal, strict DER (X.690) writer and reader for the X.509 structures of the CA domain.
 * The reader accepts DER only: definite minimal lengths, low tag numbers, no constructed string
 * types, every length checked against the input and nesting bounded (MAX_DEPTH), so hostile input
 * costs at most one pass over its bytes and never recursion beyond the bound.
 */

/** Malformed or unsupported DER; callers turn it into their domain's 400 error. */
export class DerError extends Error {}

export const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  NULL: 0x05,
  OID: 0x06,
  ENUMERATED: 0x0a,
  UTF8_STRING: 0x0c,
  PRINTABLE_STRING: 0x13,
  TELETEX_STRING: 0x14,
  IA5_STRING: 0x16,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  BMP_STRING: 0x1e,
  SEQUENCE: 0x30,
  SET: 0x31,
} as const

/** Context-specific tag [n]: constructed for EXPLICIT tags and IMPLICIT SEQUENCE/SET, else primitive. */
export const contextTag = (n: number, constructed: boolean) => 0x80 | (constructed ? 0x20 : 0) | n

const MAX_DEPTH = 32

// ---- writer -------------------------------------------------------------------------------

function encodeLength(length: number): Buffer {
  if (length < 0x80) return Buffer.of(length)
  const bytes: number[] = []
  for (let v = length; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff)
  return Buffer.from([0x80 | bytes.length, ...bytes])
}

export function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content)
  return Buffer.concat([Buffer.of(tag), encodeLength(body.length), body])
}

export const sequence = (...content: Buffer[]) => tlv(TAG.SEQUENCE, ...content)
/** DER orders the elements of a SET OF by their encodings (X.690 11.6). */
export const set = (...content: Buffer[]) => tlv(TAG.SET, ...[...content].sort(Buffer.compare))
export const explicit = (n: number, ...content: Buffer[]) => tlv(contextTag(n, true), ...content)
export const octetString = (bytes: Buffer) => tlv(TAG.OCTET_STRING, bytes)
export const bitString = (bytes: Buffer) => tlv(TAG.BIT_STRING, Buffer.of(0), bytes)
export const booleanTrue = () => tlv(TAG.BOOLEAN, Buffer.of(0xff))
export const nullValue = () => Buffer.of(TAG.NULL, 0)

/** A non-negative INTEGER from a bigint or an unsigned big-endian magnitude, minimally encoded. */
export function integer(value: bigint | Buffer, tag: number = TAG.INTEGER): Buffer {
  let magnitude: Buffer
  if (typeof value === 'bigint') {
    if (value < 0n) throw new RangeError('DER integers written here are non-negative')
    const hex = value.toString(16)
    magnitude = Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex')
  } else {
    let start = 0
    while (start < value.length - 1 && value[start] === 0) start++
    magnitude = value.length === 0 ? Buffer.of(0) : value.subarray(start)
  }
  return tlv(tag, magnitude[0]! & 0x80 ? Buffer.concat([Buffer.of(0), magnitude]) : magnitude)
}

export function oid(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number)
  const [first, second, ...rest] = arcs
  if (first === undefined || second === undefined || arcs.some((a) => !Number.isSafeInteger(a) || a < 0)) {
    throw new RangeError(`Not an object identifier: ${dotted}`)
  }
  const bytes: number[] = []
  for (const arc of [first * 40 + second, ...rest]) {
    const digits = [arc % 128]
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) digits.unshift((v % 128) | 0x80)
    bytes.push(...digits)
  }
  return tlv(TAG.OID, Buffer.from(bytes))
}

/** A named bit list (KeyUsage): DER drops trailing zero bits and counts the unused ones. */
export function namedBits(bits: readonly number[]): Buffer {
  const highest = Math.max(...bits)
  const bytes = Buffer.alloc(Math.floor(highest / 8) + 1)
  for (const bit of bits) bytes[bit >> 3]! |= 0x80 >> (bit & 7)
  return tlv(TAG.BIT_STRING, Buffer.of(7 - (highest & 7)), bytes)
}

/** RFC 5280 4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050; whole seconds, UTC. */
export function time(date: Date): Buffer {
  const year = date.getUTCFullYear()
  if (!(year >= 1950 && year <= 9999))
    throw new RangeError(`The year ${year} cannot be written in a certificate`)
  const iso = date.toISOString() // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`
  return year < 2050
    ? tlv(TAG.UTC_TIME, Buffer.from(digits.slice(2), 'latin1'))
    : tlv(TAG.GENERALIZED_TIME, Buffer.from(digits, 'latin1'))
}

// ---- reader -------------------------------------------------------------------------------

export interface DerNode {
  tag: number
  /** The whole element, header included (what a signature covers). */
  raw: Buffer
  content: Buffer
  /** The elements inside a constructed one; empty for a primitive one. */
  children: readonly DerNode[]
}

/** Parses exactly one DER element filling `input`, with every nested element (bounded depth). */
export function parseDer(input: Buffer): DerNode {
  const { node, end } = readElement(input, 0, input.length, 0)
  if (end !== input.length) throw new DerError('there are bytes after the DER element')
  return node
}

function readElement(
  input: Buffer,
  start: number,
  limit: number,
  depth: number,
): { node: DerNode; end: number } {
  if (depth > MAX_DEPTH) throw new DerError(`DER nested deeper than ${MAX_DEPTH} levels`)
  if (limit - start < 2) throw new DerError('truncated DER element')
  const tag = input[start]!
  if ((tag & 0x1f) === 0x1f || tag === 0) throw new DerError(`unsupported DER tag 0x${tag.toString(16)}`)
  // Universal types other than SEQUENCE and SET are primitive in DER (no constructed strings).
  if ((tag & 0xc0) === 0 && tag & 0x20 && tag !== TAG.SEQUENCE && tag !== TAG.SET) {
    throw new DerError(`constructed encoding of universal type ${tag & 0x1f} is not DER`)
  }
  let length = input[start + 1]!
  let header = 2
  if (length & 0x80) {
    const count = length & 0x7f
    if (count === 0) throw new DerError('indefinite lengths are not DER')
    if (count > 4) throw new DerError('DER length too large')
    if (limit - start < 2 + count) throw new DerError('truncated DER length')
    if (input[start + 2] === 0) throw new DerError('non-minimal DER length')
    length = 0
    for (let i = 0; i < count; i++) length = length * 256 + input[start + 2 + i]!
    if (length < 0x80) throw new DerError('non-minimal DER length')
    header += count
  }
  if (length > limit - start - header) throw new DerError('DER length runs past the end of the input')
  const contentStart = start + header
  const end = contentStart + length
  const children: DerNode[] = []
  if (tag & 0x20) {
    for (let at = contentStart; at < end; ) {
      const child = readElement(input, at, end, depth + 1)
      children.push(child.node)
      at = child.end
    }
  }
  return {
    node: { tag, raw: input.subarray(start, end), content: input.subarray(contentStart, end), children },
    end,
  }
}

/** Walks the elements of a SEQUENCE (or any constructed element) in order, naming what is missing. */
export class DerReader {
  private readonly items: readonly DerNode[]
  private index = 0
  private readonly what: string

  constructor(node: DerNode, what: string, tag: number = TAG.SEQUENCE) {
    if (node.tag !== tag) throw new DerError(`${what} has the wrong type`)
    this.items = node.children
    this.what = what
  }

  next(tag: number, field: string): DerNode {
    const node = this.items[this.index]
    if (!node) throw new DerError(`${this.what} lacks ${field}`)
    if (node.tag !== tag) throw new DerError(`${this.what}: ${field} has the wrong type`)
    this.index++
    return node
  }

  any(field: string): DerNode {
    const node = this.items[this.index]
    if (!node) throw new DerError(`${this.what} lacks ${field}`)
    this.index++
    return node
  }

  optional(tag: number): DerNode | undefined {
    if (this.items[this.index]?.tag !== tag) return undefined
    return this.items[this.index++]
  }

  get done(): boolean {
    return this.index === this.items.length
  }

  end(): void {
    if (!this.done) throw new DerError(`${this.what} has unexpected trailing elements`)
  }
}

function expectTag(node: DerNode, tag: number, what: string): DerNode {
  if (node.tag !== tag) throw new DerError(`${what} has the wrong type`)
  return node
}

/** The content of an INTEGER after checking it is minimal (X.690 8.3.2). */
function readIntegerBytes(node: DerNode, what: string): Buffer {
  expectTag(node, TAG.INTEGER, what)
  const c = node.content
  if (c.length === 0) throw new DerError(`${what} is an empty integer`)
  if (c.length > 1 && ((c[0] === 0 && !(c[1]! & 0x80)) || (c[0] === 0xff && c[1]! & 0x80))) {
    throw new DerError(`${what} is not a minimally encoded integer`)
  }
  return c
}

/** A non-negative INTEGER as its unsigned magnitude (the sign octet dropped). */
export function readUnsigned(node: DerNode, what: string): Buffer {
  const c = readIntegerBytes(node, what)
  if (c[0]! & 0x80) throw new DerError(`${what} is negative`)
  return c.length > 1 && c[0] === 0 ? c.subarray(1) : c
}

export function readSmallUnsigned(node: DerNode, what: string): number {
  const bytes = readUnsigned(node, what)
  if (bytes.length > 4) throw new DerError(`${what} is too large`)
  return bytes.readUIntBE(0, bytes.length)
}

export function readBoolean(node: DerNode, what: string): boolean {
  expectTag(node, TAG.BOOLEAN, what)
  if (node.content.length !== 1 || (node.content[0] !== 0 && node.content[0] !== 0xff)) {
    throw new DerError(`${what} is not a DER boolean`)
  }
  return node.content[0] === 0xff
}

export function readOid(node: DerNode, what: string): string {
  expectTag(node, TAG.OID, what)
  const c = node.content
  if (c.length === 0 || c[c.length - 1]! & 0x80) throw new DerError(`${what} is not an object identifier`)
  const arcs: number[] = []
  let value = 0
  for (let i = 0; i < c.length; i++) {
    if (value === 0 && c[i] === 0x80) throw new DerError(`${what} is not minimally encoded`)
    value = value * 128 + (c[i]! & 0x7f)
    if (value > Number.MAX_SAFE_INTEGER) throw new DerError(`${what} has an arc too large`)
    if (!(c[i]! & 0x80)) {
      if (arcs.length === 0)
        arcs.push(value < 80 ? Math.floor(value / 40) : 2, value < 80 ? value % 40 : value - 80)
      else arcs.push(value)
      value = 0
    }
  }
  return arcs.join('.')
}

/** The bytes of a BIT STRING holding whole octets (keys, signatures). */
export function readBitStringBytes(node: DerNode, what: string): Buffer {
  expectTag(node, TAG.BIT_STRING, what)
  if (node.content.length === 0 || node.content[0] !== 0) {
    throw new DerError(`${what} is not a whole number of octets`)
  }
  return node.content.subarray(1)
}

export function readOctetString(node: DerNode, what: string): Buffer {
  return expectTag(node, TAG.OCTET_STRING, what).content
}

export function readNull(node: DerNode, what: string): void {
  if (expectTag(node, TAG.NULL, what).content.length !== 0) throw new DerError(`${what} is not NULL`)
}

const UTC_TIME = /^(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/
const GENERALIZED_TIME = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/

/** UTCTime (YYMMDDHHMMSSZ, 50..99 being 19xx) or GeneralizedTime (YYYYMMDDHHMMSSZ), as RFC 5280 profiles them. */
export function readTime(node: DerNode, what: string): Date {
  const text = node.content.toString('latin1')
  const match =
    node.tag === TAG.UTC_TIME
      ? UTC_TIME.exec(text)
      : node.tag === TAG.GENERALIZED_TIME
        ? GENERALIZED_TIME.exec(text)
        : null
  if (!match) throw new DerError(`${what} is not a UTCTime or GeneralizedTime in whole seconds (Z)`)
  const [year, month, day, hour, minute, second] = match.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ]
  const fullYear = node.tag === TAG.UTC_TIME ? (year < 50 ? 2000 + year : 1900 + year) : year
  const date = new Date(Date.UTC(fullYear, month - 1, day, hour, minute, second))
  // Date.UTC rolls over (month 13, 31 February); a round trip catches what does not exist.
  if (
    date.getUTCFullYear() !== fullYear ||
    date.getUTCMonth() !== month - 1 ||
    date.getUTCDate() !== day ||
    date.getUTCHours() !== hour ||
    date.getUTCMinutes() !== minute ||
    date.getUTCSeconds() !== second
  ) {
    throw new DerError(`${what} is not a valid date`)
  }
  return date
}

/** IA5String content (also IMPLICIT-tagged, as in GeneralNames). */
export function readAscii(content: Buffer, what: string): string {
  if (content.some((b) => b > 0x7f)) throw new DerError(`${what} is not ASCII`)
  return content.toString('latin1')
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true })

/** The text of a directory string (UTF8String, PrintableString, IA5String, TeletexString, BMPString). */
export function readText(node: DerNode, what: string): string {
  const c = node.content
  switch (node.tag) {
    case TAG.UTF8_STRING:
      try {
        return STRICT_UTF8.decode(c)
      } catch {
        throw new DerError(`${what} is not valid UTF-8`)
      }
    case TAG.PRINTABLE_STRING:
    case TAG.IA5_STRING:
      return readAscii(c, what)
    case TAG.TELETEX_STRING:
      return c.toString('latin1')
    case TAG.BMP_STRING:
      if (c.length % 2) throw new DerError(`${what} is not a BMPString`)
      return Buffer.from(c).swap16().toString('utf16le')
    default:
      throw new DerError(`${what} is not a supported string type`)
  }
}
