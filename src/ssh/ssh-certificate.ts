import type { NodeKeySpec } from '../keys/algorithms.ts'
import { type SshKeyType, type SshPublicKey, SshWriter } from './ssh-wire.ts'

/**
 * OpenSSH certificates (PROTOCOL.certkeys, "v01"): the fields in their order, the CA's signature
 * over all of them, and the line a `-cert.pub` file holds.
 */

export const CERT_TYPES = ['user', 'host'] as const
export type CertType = (typeof CERT_TYPES)[number]

/** SSH_CERT_TYPE_USER and SSH_CERT_TYPE_HOST. */
const CERT_TYPE_CODE: Record<CertType, number> = { user: 1, host: 2 }

/** The flag extensions of user certificates (PROTOCOL.certkeys "Extensions"). */
export const PERMIT_EXTENSIONS = [
  'permit-X11-forwarding',
  'permit-agent-forwarding',
  'permit-port-forwarding',
  'permit-pty',
  'permit-user-rc',
] as const
export type PermitExtension = (typeof PERMIT_EXTENSIONS)[number]

export interface CriticalOptions {
  /** `force-command`: the only command the certificate may run. */
  forceCommand?: string | undefined
  /** `source-address`: comma-separated CIDRs the client must connect from. */
  sourceAddress?: string | undefined
}

/** What a certificate states, before it is signed. */
export interface CertificateFields {
  /** 32 random bytes (CA-provided nonce: a chosen-prefix hash collision is out of reach). */
  nonce: Buffer
  subject: SshPublicKey
  serial: bigint
  type: CertType
  keyId: string
  principals: readonly string[]
  validAfter: Date
  validBefore: Date
  criticalOptions: CriticalOptions
  extensions: readonly PermitExtension[]
  /** The CA's key blob (`signature key`). */
  caKey: Buffer
}

const certTypeName = (type: SshKeyType) => `${type}-cert-v01@openssh.com`

const seconds = (date: Date) => BigInt(Math.floor(date.getTime() / 1000))

/** Name/data pairs sorted by name, as both option lists must be; `data` already wire-encoded. */
function optionList(entries: readonly [string, Buffer][]): Buffer {
  const writer = new SshWriter()
  for (const [name, data] of [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    writer.string(name).string(data)
  return writer.toBuffer()
}

function criticalOptionList(options: CriticalOptions): Buffer {
  const entries: [string, Buffer][] = []
  // Each value is itself a string inside the option's data string.
  if (options.forceCommand !== undefined)
    entries.push(['force-command', new SshWriter().string(options.forceCommand).toBuffer()])
  if (options.sourceAddress !== undefined)
    entries.push(['source-address', new SshWriter().string(options.sourceAddress).toBuffer()])
  return optionList(entries)
}

/** Everything the CA signs: the certificate up to and including the signature key. */
export function certificateToBeSigned(fields: CertificateFields): Buffer {
  const principals = new SshWriter()
  for (const principal of fields.principals) principals.string(principal)
  return new SshWriter()
    .string(certTypeName(fields.subject.type))
    .string(fields.nonce)
    .raw(fields.subject.body)
    .uint64(fields.serial)
    .uint32(CERT_TYPE_CODE[fields.type])
    .string(fields.keyId)
    .string(principals.toBuffer())
    .uint64(seconds(fields.validAfter))
    .uint64(seconds(fields.validBefore))
    .string(criticalOptionList(fields.criticalOptions))
    .string(optionList(fields.extensions.map((name) => [name, Buffer.alloc(0)])))
    .string(Buffer.alloc(0))
    .string(fields.caKey)
    .toBuffer()
}

/**
 * The signature algorithm a CA key signs certificates with: Ed25519, ECDSA over the curve's hash
 * (RFC 5656), and RSA PKCS#1 v1.5 over SHA-256 (RFC 8332 rsa-sha2-256; never SHA-1 ssh-rsa).
 */
export function signatureAlgorithmOf(spec: NodeKeySpec): string {
  switch (spec.kind) {
    case 'ed25519':
      return 'ssh-ed25519'
    case 'ec':
      return `ecdsa-sha2-nistp${spec.namedCurve.slice(2)}`
    case 'rsa':
      return 'rsa-sha2-256'
    default:
      throw new Error(`no SSH signature algorithm for ${spec.kind}`)
  }
}

/**
 * The SSH signature blob of a raw signature: Ed25519's 64 bytes and RSA's modulus-sized block as
 * they are; ECDSA's IEEE P1363 r||s as the mpint pair of RFC 5656 section 3.1.2.
 */
export function sshSignature(spec: NodeKeySpec, raw: Buffer): Buffer {
  const algorithm = signatureAlgorithmOf(spec)
  let blob = raw
  if (spec.kind === 'ec') {
    const half = raw.length / 2
    blob = new SshWriter().mpint(raw.subarray(0, half)).mpint(raw.subarray(half)).toBuffer()
  }
  return new SshWriter().string(algorithm).string(blob).toBuffer()
}

/** The signed certificate: what was signed, then the signature. */
export function assembleCertificate(toBeSigned: Buffer, signature: Buffer): Buffer {
  return Buffer.concat([toBeSigned, new SshWriter().string(signature).toBuffer()])
}

/** `<cert type> <base64>[ comment]`: the line of a `-cert.pub` file. */
export function certificateLine(
  subjectType: SshKeyType,
  certificate: Buffer,
  comment?: string | null,
): string {
  return `${certTypeName(subjectType)} ${certificate.toString('base64')}${comment ? ` ${comment}` : ''}`
}
