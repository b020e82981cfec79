import { SshWriter } from './ssh-wire.ts'

/**
 * OpenSSH key revocation lists (PROTOCOL.krl), the file sshd's `RevokedKeys` and
 * `ssh-keygen -Q` read: the header, and one KRL_SECTION_CERTIFICATES section for one CA listing
 * revoked serials (KRL_SECTION_CERT_SERIAL_LIST). Unsigned: sshd trusts the file it is given, and
 * the operator fetches it over TLS from the service.
 */

/** "SSHKRL\n\0" */
const KRL_MAGIC = 0x5353484b524c0a00n
const KRL_FORMAT_VERSION = 1
const KRL_SECTION_CERTIFICATES = 1
const KRL_SECTION_CERT_SERIAL_LIST = 0x20

export interface KrlInput {
  /** The CA's key blob: the certificates section applies to certificates it signed. */
  caKey: Buffer
  /** Revoked serials (non-zero: a KRL cannot revoke serial 0). */
  serials: readonly bigint[]
  /** Increases with every change of the list (the tooling prints it). */
  version: bigint
  generatedAt: Date
  comment: string
}

export function buildKrl(input: KrlInput): Buffer {
  const writer = new SshWriter()
    .uint64(KRL_MAGIC)
    .uint32(KRL_FORMAT_VERSION)
    .uint64(input.version)
    .uint64(BigInt(Math.floor(input.generatedAt.getTime() / 1000)))
    .uint64(0n)
    .string(Buffer.alloc(0))
    .string(input.comment)
  const serials = [...new Set(input.serials)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  if (serials.length > 0) {
    const list = new SshWriter()
    for (const serial of serials) list.uint64(serial)
    const section = new SshWriter()
      .string(input.caKey)
      .string(Buffer.alloc(0))
      .byte(KRL_SECTION_CERT_SERIAL_LIST)
      .string(list.toBuffer())
      .toBuffer()
    writer.byte(KRL_SECTION_CERTIFICATES).string(section)
  }
  return writer.toBuffer()
}
