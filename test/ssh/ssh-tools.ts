import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { createPublicKey, type KeyObject, verify } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * What the SSH tests check the service's certificates with, apart from the service's own code:
 * OpenSSH's ssh-keygen (which verifies the CA signature when it reads a certificate) and a
 * reading of the certificate written here over node:crypto (PROTOCOL.certkeys).
 */

/** ssh-keygen prints validity in local time: UTC keeps the tests' comparisons plain. */
const ENV = { ...process.env, TZ: 'UTC' }

function sshKeygen(args: string[]): string {
  return execFileSync('ssh-keygen', args, { env: ENV, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}

/** Runs ssh-keygen, resolving with its exit code and output whatever the code. */
export function sshKeygenResult(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('ssh-keygen', args, { env: ENV, encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0
      resolve({ code, stdout, stderr })
    })
  })
}

export interface TempDir {
  path: string
  file(name: string, content?: string | Buffer): string
  remove(): void
}

export function tempDir(prefix: string): TempDir {
  const path = mkdtempSync(join(tmpdir(), prefix))
  return {
    path,
    file(name, content) {
      const file = join(path, name)
      if (content !== undefined) writeFileSync(file, content, { mode: 0o600 })
      return file
    },
    remove: () => rmSync(path, { recursive: true, force: true }),
  }
}

export interface KeyPair {
  /** The private key file (ssh -i). */
  path: string
  /** The `.pub` line. */
  publicLine: string
  /** ssh-keygen -l's SHA256 fingerprint. */
  fingerprint: string
}

/** A new key pair made by ssh-keygen (`type`: ed25519, ecdsa, rsa). */
export function keygen(dir: TempDir, name: string, type: string, bits?: number): KeyPair {
  const path = dir.file(name)
  sshKeygen([
    '-q',
    '-t',
    type,
    ...(bits ? ['-b', String(bits)] : []),
    '-N',
    '',
    '-C',
    `${name}@test`,
    '-f',
    path,
  ])
  const publicLine = readFileSync(`${path}.pub`, 'utf8').trim()
  return { path, publicLine, fingerprint: fingerprintOf(`${path}.pub`) }
}

export function fingerprintOf(publicKeyFile: string): string {
  return sshKeygen(['-l', '-E', 'sha256', '-f', publicKeyFile]).split(' ')[1]!
}

/** What `ssh-keygen -L` says of a certificate. */
export interface CertificateListing {
  type: string
  publicKey: string
  signingCa: string
  keyId: string
  serial: string
  valid: string
  principals: string[]
  criticalOptions: string[]
  extensions: string[]
}

/** `ssh-keygen -L -f <file>`, parsed; fails the test when ssh-keygen refuses the certificate. */
export function listCertificate(file: string): CertificateListing {
  const text = sshKeygen(['-L', '-f', file])
  const field = (name: string) => new RegExp(`^\\s*${name}: (.*)$`, 'm').exec(text)?.[1]?.trim() ?? ''
  const block = (name: string) => {
    const lines = text.split('\n')
    const start = lines.findIndex((line) => line.trim() === `${name}:` || line.trim().startsWith(`${name}: `))
    if (start < 0) return []
    const inline = lines[start]!.trim()
      .slice(name.length + 1)
      .trim()
    if (inline === '(none)') return []
    const items: string[] = []
    for (const line of lines.slice(start + 1)) {
      if (!/^\s{16}/.test(line) || line.trim() === '') break
      items.push(line.trim())
    }
    return items
  }
  return {
    type: field('Type'),
    publicKey: field('Public key'),
    signingCa: field('Signing CA'),
    keyId: field('Key ID').replace(/^"|"$/g, ''),
    serial: field('Serial'),
    valid: field('Valid'),
    principals: block('Principals'),
    criticalOptions: block('Critical Options'),
    extensions: block('Extensions'),
  }
}

/** `from 2026-01-01T00:00:00 to ...` in ssh-keygen's form for two instants (UTC, to the second). */
export const validText = (after: Date, before: Date) =>
  `from ${after.toISOString().slice(0, 19)} to ${before.toISOString().slice(0, 19)}`

// ---- an independent reading of the certificate ---------------------------------------------

class Reader {
  offset = 0
  readonly bytes: Buffer
  constructor(bytes: Buffer) {
    this.bytes = bytes
  }
  uint32() {
    const value = this.bytes.readUInt32BE(this.offset)
    this.offset += 4
    return value
  }
  uint64() {
    const value = this.bytes.readBigUInt64BE(this.offset)
    this.offset += 8
    return value
  }
  string() {
    const length = this.uint32()
    assert.ok(this.offset + length <= this.bytes.length, 'string within the blob')
    const value = this.bytes.subarray(this.offset, this.offset + length)
    this.offset += length
    return value
  }
}

function stringList(bytes: Buffer): Buffer[] {
  const reader = new Reader(bytes)
  const out: Buffer[] = []
  while (reader.offset < bytes.length) out.push(reader.string())
  return out
}

export interface ReadCertificate {
  certType: string
  nonce: Buffer
  /** The subject key's fields, each a wire string (or mpint). */
  subjectFields: Buffer[]
  serial: bigint
  kind: number
  keyId: string
  principals: string[]
  validAfter: bigint
  validBefore: bigint
  criticalOptions: [string, Buffer][]
  extensions: [string, Buffer][]
  signatureKey: Buffer
  signedBytes: Buffer
  signatureAlgorithm: string
  signatureBlob: Buffer
}

const SUBJECT_FIELDS: Record<string, number> = {
  'ssh-ed25519-cert-v01@openssh.com': 1,
  'ecdsa-sha2-nistp256-cert-v01@openssh.com': 2,
  'ecdsa-sha2-nistp384-cert-v01@openssh.com': 2,
  'ecdsa-sha2-nistp521-cert-v01@openssh.com': 2,
  'ssh-rsa-cert-v01@openssh.com': 2,
}

/** Reads a `-cert.pub` line field by field (PROTOCOL.certkeys). */
export function readCertificate(line: string): ReadCertificate {
  const [lineType, encoded] = line.split(' ')
  const blob = Buffer.from(encoded!, 'base64')
  const reader = new Reader(blob)
  const certType = reader.string().toString()
  assert.equal(certType, lineType, 'the line names the blob’s type')
  const nonce = reader.string()
  const subjectFields = Array.from({ length: SUBJECT_FIELDS[certType]! }, () => reader.string())
  const serial = reader.uint64()
  const kind = reader.uint32()
  const keyId = reader.string().toString()
  const principals = stringList(reader.string()).map((p) => p.toString())
  const validAfter = reader.uint64()
  const validBefore = reader.uint64()
  const pairs = (bytes: Buffer) => {
    const items = stringList(bytes)
    const out: [string, Buffer][] = []
    for (let i = 0; i < items.length; i += 2) out.push([items[i]!.toString(), items[i + 1]!])
    return out
  }
  const criticalOptions = pairs(reader.string())
  const extensions = pairs(reader.string())
  assert.equal(reader.string().length, 0, 'reserved is empty')
  const signatureKey = reader.string()
  const signedBytes = blob.subarray(0, reader.offset)
  const signature = new Reader(reader.string())
  assert.equal(reader.offset, blob.length, 'nothing after the signature')
  const signatureAlgorithm = signature.string().toString()
  const signatureBlob = signature.string()
  return {
    certType,
    nonce,
    subjectFields,
    serial,
    kind,
    keyId,
    principals,
    validAfter,
    validBefore,
    criticalOptions,
    extensions,
    signatureKey,
    signedBytes,
    signatureAlgorithm,
    signatureBlob,
  }
}

const CURVES: Record<string, { crv: string; size: number; hash: string }> = {
  nistp256: { crv: 'P-256', size: 32, hash: 'sha256' },
  nistp384: { crv: 'P-384', size: 48, hash: 'sha384' },
  nistp521: { crv: 'P-521', size: 66, hash: 'sha512' },
}

const unsigned = (mpint: Buffer, size: number) => {
  let start = 0
  while (start < mpint.length - 1 && mpint[start] === 0) start++
  const trimmed = mpint.subarray(start)
  return Buffer.concat([Buffer.alloc(Math.max(0, size - trimmed.length)), trimmed])
}

/** A key blob (`ssh-ed25519`, `ecdsa-sha2-*`, `ssh-rsa`) as a node:crypto KeyObject. */
function keyObjectOfBlob(blob: Buffer): { type: string; key: KeyObject; curve?: string } {
  const reader = new Reader(blob)
  const type = reader.string().toString()
  if (type === 'ssh-ed25519') {
    const x = reader.string().toString('base64url')
    return { type, key: createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' }) }
  }
  if (type === 'ssh-rsa') {
    const e = unsigned(reader.string(), 0).toString('base64url')
    const n = unsigned(reader.string(), 0).toString('base64url')
    return { type, key: createPublicKey({ key: { kty: 'RSA', n, e }, format: 'jwk' }) }
  }
  const curveName = reader.string().toString()
  const curve = CURVES[curveName]!
  const point = reader.string()
  const x = point.subarray(1, 1 + curve.size).toString('base64url')
  const y = point.subarray(1 + curve.size).toString('base64url')
  return {
    type,
    curve: curveName,
    key: createPublicKey({ key: { kty: 'EC', crv: curve.crv, x, y }, format: 'jwk' }),
  }
}

/** Whether the certificate's signature verifies with node:crypto under the given CA key blob. */
export function signatureVerifies(certificate: ReadCertificate, caBlob: Buffer): boolean {
  const { type, key, curve } = keyObjectOfBlob(caBlob)
  const data = certificate.signedBytes
  if (type === 'ssh-ed25519') {
    assert.equal(certificate.signatureAlgorithm, 'ssh-ed25519')
    return verify(null, data, key, certificate.signatureBlob)
  }
  if (type === 'ssh-rsa') {
    assert.equal(certificate.signatureAlgorithm, 'rsa-sha2-256', 'RSA signs with SHA-256, never SHA-1')
    return verify('sha256', data, key, certificate.signatureBlob)
  }
  const { size, hash } = CURVES[curve!]!
  assert.equal(certificate.signatureAlgorithm, `ecdsa-sha2-${curve}`)
  const reader = new Reader(certificate.signatureBlob)
  const r = unsigned(reader.string(), size)
  const s = unsigned(reader.string(), size)
  return verify(hash, data, { key, dsaEncoding: 'ieee-p1363' }, Buffer.concat([r, s]))
}

/** The blob of an OpenSSH public key line. */
export const blobOfLine = (line: string) => Buffer.from(line.trim().split(/\s+/)[1]!, 'base64')
