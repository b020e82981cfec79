import { isIPv4, isIPv6 } from 'node:net'
import { invalidField } from '../platform/errors.ts'
import {
  contextTag,
  DerError,
  type DerNode,
  DerReader,
  oid,
  readAscii,
  readOid,
  readText,
  sequence,
  set,
  TAG,
  tlv,
} from './der.ts'

/** Names in certificates: the subject/issuer Name (RFC 5280 4.1.2.4) and GeneralNames (4.2.1.6). */

export interface NameAttributes {
  commonName: string
  organization?: string
  organizationalUnit?: string
  country?: string
  locality?: string
  state?: string
}

export interface AltNames {
  dns?: string[]
  ip?: string[]
  email?: string[]
  uri?: string[]
}

const COMMON_NAME_OID = '2.5.4.3'

/** RDN order C, ST, L, O, OU, CN, with RFC 5280 appendix A upper bounds. */
const NAME_ATTRIBUTES = [
  { field: 'country', oid: '2.5.4.6', max: 2 },
  { field: 'state', oid: '2.5.4.8', max: 128 },
  { field: 'locality', oid: '2.5.4.7', max: 128 },
  { field: 'organization', oid: '2.5.4.10', max: 64 },
  { field: 'organizationalUnit', oid: '2.5.4.11', max: 64 },
  { field: 'commonName', oid: COMMON_NAME_OID, max: 64 },
] as const

// C0 and C1 controls have no place in a name and would let one name look like another.
const hasControlCharacter = (text: string) =>
  [...text].some((c) => c.charCodeAt(0) < 0x20 || (c.charCodeAt(0) >= 0x7f && c.charCodeAt(0) <= 0x9f))

/**
 * The DER Name, one attribute per RDN, as UTF8String (country as a 2-letter PrintableString).
 * An empty attribute is left out, so `{ commonName: '' }` gives the empty Name (SEQUENCE {}).
 */
export function encodeName(name: NameAttributes): Buffer {
  const rdns: Buffer[] = []
  for (const attribute of NAME_ATTRIBUTES) {
    const value = name[attribute.field]
    if (value === undefined || value === '') continue
    const path = `subject.${attribute.field}`
    if (typeof value !== 'string') throw invalidField(path, 'must be a string')
    if (attribute.field === 'country') {
      if (!/^[A-Z]{2}$/.test(value)) throw invalidField(path, 'must be two capital letters (ISO 3166)')
    } else if (value.length > attribute.max || !value.isWellFormed() || hasControlCharacter(value)) {
      throw invalidField(path, `must be at most ${attribute.max} characters, without control characters`)
    }
    const text = Buffer.from(value, 'utf8')
    const encoded = tlv(attribute.field === 'country' ? TAG.PRINTABLE_STRING : TAG.UTF8_STRING, text)
    rdns.push(set(sequence(oid(attribute.oid), encoded)))
  }
  return sequence(...rdns)
}

/** Checks a Name's structure (SEQUENCE OF SET OF {type, value}) and returns its common name, if any. */
export function readName(node: DerNode, what: string): { commonName: string | null } {
  if (node.tag !== TAG.SEQUENCE) throw new DerError(`${what} is not a Name`)
  let commonName: string | null = null
  for (const rdn of node.children) {
    if (rdn.tag !== TAG.SET || rdn.children.length === 0) throw new DerError(`${what} has a malformed RDN`)
    for (const attribute of rdn.children) {
      const reader = new DerReader(attribute, `${what} attribute`)
      const type = readOid(reader.next(TAG.OID, 'type'), `${what} attribute type`)
      const value = reader.any('value')
      reader.end()
      // The most specific CN comes last in a Name ordered from the root down.
      if (type === COMMON_NAME_OID) commonName = readText(value, `${what} common name`)
    }
  }
  return { commonName }
}

export const isEmptyName = (nameDer: Buffer) => nameDer.length === 2 && nameDer[0] === TAG.SEQUENCE

// ---- GeneralNames ---------------------------------------------------------------------------

const GENERAL_NAME_TAG = {
  email: contextTag(1, false),
  dns: contextTag(2, false),
  uri: contextTag(6, false),
  ip: contextTag(7, false),
}
const MAX_NAMES = 100
const DNS_LABEL = '[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?'
const DNS_NAME = new RegExp(`^(?:\\*\\.)?(?:${DNS_LABEL}\\.)*${DNS_LABEL}$`)
const DNS_CONSTRAINT = new RegExp(`^\\.?(?:${DNS_LABEL}\\.)*${DNS_LABEL}$`)
const EMAIL = /^[\x21-\x7e]{1,64}@[A-Za-z0-9.-]{1,253}$/

function ia5(value: unknown, path: string, valid: (text: string) => boolean, expected: string): Buffer {
  if (typeof value !== 'string' || value.length > 2048 || !/^[\x20-\x7e]+$/.test(value) || !valid(value)) {
    throw invalidField(path, `must be ${expected} (ASCII)`)
  }
  return Buffer.from(value, 'latin1')
}

const isUri = (text: string) => URL.canParse(text) && /^[A-Za-z][A-Za-z0-9+.-]*:/.test(text)

export function uriName(uri: unknown, path: string): Buffer {
  return tlv(GENERAL_NAME_TAG.uri, ia5(uri, path, isUri, 'an absolute URI'))
}

function bounded<T>(list: T[] | undefined, path: string): T[] {
  if (list === undefined) return []
  if (!Array.isArray(list) || list.length > MAX_NAMES)
    throw invalidField(path, `must list at most ${MAX_NAMES} names`)
  return list
}

/** The GeneralName elements of a SAN (not yet wrapped in the GeneralNames SEQUENCE). */
export function encodeAltNames(names: AltNames, path = 'subjectAltNames'): Buffer[] {
  return [
    ...bounded(names.dns, `${path}.dns`).map((d) =>
      tlv(
        GENERAL_NAME_TAG.dns,
        ia5(d, `${path}.dns`, (t) => t.length <= 253 && DNS_NAME.test(t), 'a DNS name'),
      ),
    ),
    ...bounded(names.ip, `${path}.ip`).map((a) => tlv(GENERAL_NAME_TAG.ip, ipBytes(a, `${path}.ip`))),
    ...bounded(names.email, `${path}.email`).map((e) =>
      tlv(
        GENERAL_NAME_TAG.email,
        ia5(e, `${path}.email`, (t) => EMAIL.test(t), 'an email address'),
      ),
    ),
    ...bounded(names.uri, `${path}.uri`).map((u) => uriName(u, `${path}.uri`)),
  ]
}

/** GeneralSubtree bases of a NameConstraints extension: DNS suffixes and IP ranges (CIDR). */
export function encodeSubtrees(
  dns: string[] | undefined,
  cidrs: string[] | undefined,
  path: string,
): Buffer[] {
  return [
    ...bounded(dns, `${path}Dns`).map((d) =>
      sequence(
        tlv(
          GENERAL_NAME_TAG.dns,
          ia5(d, `${path}Dns`, (t) => t.length <= 253 && DNS_CONSTRAINT.test(t), 'a DNS domain'),
        ),
      ),
    ),
    ...bounded(cidrs, `${path}Ip`).map((c) => sequence(tlv(GENERAL_NAME_TAG.ip, cidrBytes(c, `${path}Ip`)))),
  ]
}

/** The names of a GeneralNames SEQUENCE that a CA issues for; other forms (otherName, directoryName…) are skipped. */
export function decodeAltNames(node: DerNode, what: string): Required<AltNames> {
  if (node.tag !== TAG.SEQUENCE) throw new DerError(`${what} is not a GeneralNames sequence`)
  if (node.children.length > MAX_NAMES) throw new DerError(`${what} lists more than ${MAX_NAMES} names`)
  const names: Required<AltNames> = { dns: [], ip: [], email: [], uri: [] }
  for (const name of node.children) {
    const ascii = () => readAscii(name.content, what)
    if (name.tag === GENERAL_NAME_TAG.dns) names.dns.push(ascii())
    else if (name.tag === GENERAL_NAME_TAG.email) names.email.push(ascii())
    else if (name.tag === GENERAL_NAME_TAG.uri) names.uri.push(ascii())
    else if (name.tag === GENERAL_NAME_TAG.ip) names.ip.push(formatIp(name.content, what))
  }
  return names
}

// ---- IP addresses -------------------------------------------------------------------------

/** An IPv4 or IPv6 address in text as its 4 or 16 network-order bytes. */
function ipBytes(text: unknown, path: string): Buffer {
  const bytes = typeof text === 'string' && text.length <= 64 ? parseIp(text) : null
  if (!bytes) throw invalidField(path, 'must be an IPv4 or IPv6 address')
  return bytes
}

function parseIp(text: string): Buffer | null {
  if (isIPv4(text)) return Buffer.from(text.split('.').map(Number))
  if (!isIPv6(text) || text.includes('%')) return null
  let groups = text
  const lastColon = text.lastIndexOf(':')
  if (text.includes('.')) {
    const v4 = Buffer.from(
      text
        .slice(lastColon + 1)
        .split('.')
        .map(Number),
    )
    groups = `${text.slice(0, lastColon + 1)}${v4.readUInt16BE(0).toString(16)}:${v4.readUInt16BE(2).toString(16)}`
  }
  const [head = '', tail] = groups.split('::')
  const headGroups = head ? head.split(':') : []
  const tailGroups = tail ? tail.split(':') : []
  const zeros = tail === undefined ? [] : Array(8 - headGroups.length - tailGroups.length).fill('0')
  return Buffer.concat(
    [...headGroups, ...zeros, ...tailGroups].map((g) => {
      const group = Buffer.alloc(2)
      group.writeUInt16BE(Number.parseInt(g, 16))
      return group
    }),
  )
}

/** "10.0.0.0/8" or "2001:db8::/32" as address then mask (RFC 5280 4.2.1.10); host bits must be zero. */
function cidrBytes(text: unknown, path: string): Buffer {
  const [address, prefixText, extra] = typeof text === 'string' ? text.split('/') : []
  const bytes = address !== undefined && address.length <= 64 ? parseIp(address) : null
  const prefix = prefixText !== undefined && /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : -1
  if (!bytes || extra !== undefined || prefix < 0 || prefix > bytes.length * 8) {
    throw invalidField(path, 'must be an IP range in CIDR notation (10.0.0.0/8, 2001:db8::/32)')
  }
  const mask = Buffer.alloc(bytes.length)
  for (let bit = 0; bit < prefix; bit++) mask[bit >> 3]! |= 0x80 >> (bit & 7)
  if (bytes.some((b, i) => (b & ~mask[i]!) !== 0))
    throw invalidField(path, 'has host bits set after the prefix')
  return Buffer.concat([bytes, mask])
}

/** IPv4 dotted, IPv6 in RFC 5952 form (lower case, the longest run of zero groups as ::). */
function formatIp(bytes: Buffer, what: string): string {
  if (bytes.length === 4) return [...bytes].join('.')
  if (bytes.length !== 16) throw new DerError(`${what} has an IP address that is neither 4 nor 16 bytes`)
  const groups = Array.from({ length: 8 }, (_, i) => bytes.readUInt16BE(i * 2))
  let best = { start: -1, length: 1 }
  for (let i = 0; i < 8; ) {
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > best.length) best = { start: i, length: j - i }
    i = j > i ? j : i + 1
  }
  const hex = groups.map((g) => g.toString(16))
  if (best.start < 0) return hex.join(':')
  return `${hex.slice(0, best.start).join(':')}::${hex.slice(best.start + best.length).join(':')}`
}
