import { randomBytes } from 'node:crypto'
import { type CeilingWork, MIXED_CYCLE, type SigningAlgorithm } from './ceiling-work.ts'
import type { RequestSpec } from './load.ts'

/** A tenant's API over HTTP, for setting a scenario up (keys, ciphertexts, signatures). */
export interface SetupApi {
  post(path: string, body: unknown): Promise<Record<string, unknown>>
  /** A binary (application/octet-stream) request; the response body's bytes. */
  postBinary(path: string, body: Buffer, headers: Record<string, string>): Promise<Buffer>
  createKey(keyType: string, algorithm: string): Promise<string>
}

export interface PreparedScenario {
  cycle: RequestSpec[]
  /** Audit records each request of the cycle must leave, in cycle order (0: not audited). */
  auditRecords: number[]
  /**
   * The HTTP floor's work for each request of the cycle, when the requests differ (the mixed
   * scenario); otherwise every request does the scenario's ceiling work. undefined: none.
   */
  floorWork?: (CeilingWork | undefined)[]
}

export interface Scenario {
  id: string
  title: string
  /** The same cryptographic work for the raw ceiling; absent when the ratio means nothing. */
  ceiling?: CeilingWork
  /** Ceiling operations in one request (1,000 for a batch). */
  itemsPerRequest: number
  /** Plaintext bytes per item, when the figure that matters is bytes per second. */
  bytesPerItem?: number
  connections: number
  /** Seconds of measured load (the rest of the run is set-up, ceiling and warm-up). */
  seconds: { quick: number; full: number }
  /** Minimum ratio the issue sets (issue 16): service ÷ HTTP floor, or ÷ ceiling for heavy work. */
  target?: Target
  prepare(api: SetupApi): Promise<PreparedScenario>
}

export interface Target {
  ratio: number
  of: 'floor' | 'ceiling'
}
const ofFloor = (ratio: number): Target => ({ ratio, of: 'floor' })

/** A swept scenario's target where the issue measures it (issue 33: at 128 connections). */
export interface SweepTarget {
  /** Minimum service ÷ HTTP floor at the same connection count. */
  floor: number
  /** Maximum CPU µs of the API processes per request. */
  apiCpuUs?: number
}

/**
 * The connections sweep (`--sweep`, and every full run): the small operations and MAC, each at
 * these connection counts against the HTTP floor at the same count. The acceptance is
 * read at ACCEPTANCE_CONNECTIONS.
 */
export const SWEEP_CONNECTIONS: readonly number[] = [8, 32, 128, 256]
export const ACCEPTANCE_CONNECTIONS = 128
const small: SweepTarget = { floor: 0.7 }
export const SWEEP_TARGETS: Readonly<Record<string, SweepTarget>> = {
  'encrypt-64-b': small,
  'decrypt-64-b': small,
  'sign-ed25519': small,
  'verify-ed25519': small,
  'sign-ec-p256': small,
  'verify-ec-p256': small,
  'generate-data-key': small,
  'mac-hmac-sha256': { floor: 0.6, apiCpuUs: 35 },
}

const V1 = '/api/v1'
const json = (value: unknown) => JSON.stringify(value)
const slug = (label: string) => label.toLowerCase().replaceAll(' ', '-')
const b64 = (bytes: number) => randomBytes(bytes).toString('base64')

/**
 * Single encrypts or decrypts of one size with an ML-KEM-768 key, as JSON or with binary bodies
 * (application/octet-stream: raw plaintext in, the compact envelope out, and back).
 */
function envelopeScenario(
  operation: 'encrypt' | 'decrypt',
  bytes: number,
  label: string,
  options: { target?: Target; binary?: boolean } = {},
): Scenario {
  const large = bytes >= 1 << 20
  const binary = options.binary === true
  return {
    id: `${operation}-${slug(label)}${binary ? '-binary' : ''}`,
    title: `${operation} ML-KEM-768 ${label}${binary ? ' (binary body)' : ''}`,
    ceiling: { kind: operation, bytes },
    itemsPerRequest: 1,
    bytesPerItem: bytes,
    connections: large ? 8 : 32,
    seconds: { quick: large ? 3 : 2, full: 10 },
    ...(options.target ? { target: options.target } : {}),
    async prepare(api) {
      const keyId = await api.createKey('Encryption', 'ML-KEM-768')
      const path = `${V1}/${operation}`
      const headers = { 'content-type': 'application/octet-stream', 'x-key-id': keyId }
      const cycle: RequestSpec[] = []
      if (operation === 'encrypt') {
        cycle.push(
          binary
            ? { method: 'POST', path, headers, body: randomBytes(bytes) }
            : { method: 'POST', path, body: json({ keyId, plaintext: b64(bytes) }) },
        )
      } else {
        // A few different envelopes, so no layer can get away with remembering one answer.
        for (let i = 0; i < (large ? 2 : 8); i++) {
          if (binary) {
            const envelope = await api.postBinary('/encrypt', randomBytes(bytes), headers)
            cycle.push({ method: 'POST', path, headers, body: envelope })
          } else {
            const { keyVersion: _version, ...envelope } = await api.post('/encrypt', {
              keyId,
              plaintext: b64(bytes),
            })
            cycle.push({ method: 'POST', path, body: json(envelope) })
          }
        }
      }
      return { cycle, auditRecords: cycle.map(() => 1) }
    },
  }
}

const BATCH_ITEMS = 1000

/**
 * Batches of 1,000 × 64 B items with one ML-KEM-768 key; decrypt sends back what encrypt gave.
 * `binary`: the application/octet-stream framing of docs/envelope-format.md ("Binary batches").
 */
function batchScenario(operation: 'encrypt' | 'decrypt', options: { binary?: boolean } = {}): Scenario {
  const binary = options.binary === true
  return {
    id: `${operation}-batch${binary ? '-binary' : ''}`,
    title: `${operation} batch ${BATCH_ITEMS} × 64 B${binary ? ' (binary body)' : ''}`,
    ceiling: { kind: operation, bytes: 64 },
    itemsPerRequest: BATCH_ITEMS,
    bytesPerItem: 64,
    connections: 8,
    seconds: { quick: 3, full: 10 },
    target: ofFloor(0.85),
    async prepare(api) {
      const keyId = await api.createKey('Encryption', 'ML-KEM-768')
      const path = `${V1}/${operation}/batch`
      if (binary) {
        const headers = { 'content-type': 'application/octet-stream', 'x-key-id': keyId }
        let data: Buffer[] = Array.from({ length: BATCH_ITEMS }, () => randomBytes(64))
        if (operation === 'decrypt') {
          data = readBinaryBatch(await api.postBinary('/encrypt/batch', frameBinaryBatch(data), headers))
        }
        const { 'x-key-id': _key, ...decryptHeaders } = headers
        return {
          cycle: [
            {
              method: 'POST',
              path,
              headers: operation === 'encrypt' ? headers : decryptHeaders,
              body: frameBinaryBatch(data),
            },
          ],
          auditRecords: [1],
        }
      }
      let items: unknown[] = Array.from({ length: BATCH_ITEMS }, () => ({ keyId, plaintext: b64(64) }))
      if (operation === 'decrypt')
        items = ((await api.post('/encrypt/batch', { items })) as { results: unknown[] }).results
      return {
        cycle: [{ method: 'POST', path, body: json({ items }) }],
        auditRecords: [1],
      }
    },
  }
}

/** The binary batch request: count, then per item its length-prefixed data and an empty context. */
function frameBinaryBatch(data: readonly Buffer[]): Buffer {
  const size = data.reduce((sum, d) => sum + 4 + d.length + 2, 4)
  const out = Buffer.alloc(size)
  let at = out.writeUInt32BE(data.length, 0)
  for (const d of data) {
    at = out.writeUInt32BE(d.length, at)
    at += d.copy(out, at)
    at = out.writeUInt16BE(0, at)
  }
  return out
}

/** The bytes of each result of a binary batch response (every item must have succeeded). */
function readBinaryBatch(body: Buffer): Buffer[] {
  const out: Buffer[] = []
  let at = 4
  for (let i = body.readUInt32BE(0); i > 0; i--) {
    if (body[at] !== 0) throw new Error('a binary batch item failed during set-up')
    const length = body.readUInt32BE(at + 1 + 16 + 4)
    at += 1 + 16 + 4 + 4
    out.push(body.subarray(at, at + length))
    at += length
  }
  return out
}

function signingScenarios(
  algorithm: SigningAlgorithm,
  target?: { sign?: Target; verify?: Target },
): Scenario[] {
  const slug = algorithm.toLowerCase()
  const prepareKey = async (api: SetupApi) => {
    const keyId = await api.createKey('Signing', algorithm)
    const message = b64(64)
    return { keyId, message }
  }
  return [
    {
      id: `sign-${slug}`,
      title: `sign ${algorithm}`,
      ceiling: { kind: 'sign', algorithm },
      itemsPerRequest: 1,
      connections: 32,
      seconds: { quick: 2, full: 10 },
      ...(target?.sign ? { target: target.sign } : {}),
      async prepare(api) {
        const { keyId, message } = await prepareKey(api)
        return {
          cycle: [{ method: 'POST', path: `${V1}/sign`, body: json({ keyId, message }) }],
          auditRecords: [1],
        }
      },
    },
    {
      id: `verify-${slug}`,
      title: `verify ${algorithm}`,
      ceiling: { kind: 'verify', algorithm },
      itemsPerRequest: 1,
      connections: 32,
      seconds: { quick: 2, full: 10 },
      ...(target?.verify ? { target: target.verify } : {}),
      async prepare(api) {
        const { keyId, message } = await prepareKey(api)
        const { signature } = await api.post('/sign', { keyId, message })
        return {
          cycle: [{ method: 'POST', path: `${V1}/verify`, body: json({ keyId, message, signature }) }],
          auditRecords: [1],
        }
      },
    },
  ]
}

export const SCENARIOS: readonly Scenario[] = [
  envelopeScenario('encrypt', 64, '64 B', { target: ofFloor(0.7) }),
  envelopeScenario('encrypt', 4096, '4 KB'),
  envelopeScenario('encrypt', 1 << 20, '1 MB'),
  envelopeScenario('decrypt', 64, '64 B', { target: ofFloor(0.7) }),
  envelopeScenario('decrypt', 4096, '4 KB'),
  envelopeScenario('decrypt', 1 << 20, '1 MB'),
  envelopeScenario('encrypt', 64, '64 B', { binary: true }),
  envelopeScenario('encrypt', 1 << 20, '1 MB', { target: ofFloor(0.85), binary: true }),
  envelopeScenario('decrypt', 1 << 20, '1 MB', { target: ofFloor(0.85), binary: true }),
  batchScenario('encrypt'),
  batchScenario('decrypt'),
  batchScenario('encrypt', { binary: true }),
  batchScenario('decrypt', { binary: true }),
  ...signingScenarios('ML-DSA-65', { sign: { ratio: 0.75, of: 'ceiling' } }),
  ...signingScenarios('Ed25519', { sign: ofFloor(0.7), verify: ofFloor(0.7) }),
  ...signingScenarios('EC-P256', { sign: ofFloor(0.7), verify: ofFloor(0.7) }),
  {
    id: 'mac-hmac-sha256',
    title: 'MAC HMAC-SHA256',
    ceiling: { kind: 'mac' },
    itemsPerRequest: 1,
    connections: 32,
    seconds: { quick: 2, full: 10 },
    target: ofFloor(0.7),
    async prepare(api) {
      const keyId = await api.createKey('HMAC', 'HMAC-SHA256')
      return {
        cycle: [{ method: 'POST', path: `${V1}/keys/${keyId}/mac`, body: json({ data: b64(64) }) }],
        auditRecords: [1],
      }
    },
  },
  {
    id: 'generate-data-key',
    title: 'generate-data-key (ML-KEM-768)',
    ceiling: { kind: 'data-key' },
    itemsPerRequest: 1,
    connections: 32,
    seconds: { quick: 2, full: 10 },
    target: ofFloor(0.7),
    async prepare(api) {
      const keyId = await api.createKey('Encryption', 'ML-KEM-768')
      return {
        cycle: [{ method: 'POST', path: `${V1}/generate-data-key`, body: json({ keyId }) }],
        auditRecords: [1],
      }
    },
  },
  {
    id: 'create-key',
    title: 'key creation ML-KEM-768',
    ceiling: { kind: 'create-key' },
    itemsPerRequest: 1,
    connections: 16,
    seconds: { quick: 3, full: 60 },
    async prepare() {
      // autocannon replaces [<id>] with a fresh id on every request: names must be unique.
      const body = json({ name: 'bench-[<id>]', keyType: 'Encryption', algorithm: 'ML-KEM-768' })
      return { cycle: [{ method: 'POST', path: `${V1}/keys`, body }], auditRecords: [1] }
    },
  },
  {
    id: 'mixed',
    title: 'mixed 70% enc/dec, 20% sign/verify, 10% reads',
    ceiling: { kind: 'mixed' },
    itemsPerRequest: 1,
    connections: 32,
    seconds: { quick: 4, full: 20 },
    async prepare(api) {
      const encryptionKey = await api.createKey('Encryption', 'ML-KEM-768')
      const signingKey = await api.createKey('Signing', 'ML-DSA-65')
      const message = b64(64)
      const cycle: RequestSpec[] = []
      let reads = 0
      // Two rounds of the cycle, so the admin reads can alternate between a key and the list.
      const rounds = [...MIXED_CYCLE, ...MIXED_CYCLE]
      for (const op of rounds) {
        if (op === 'encrypt') {
          cycle.push({
            method: 'POST',
            path: `${V1}/encrypt`,
            body: json({ keyId: encryptionKey, plaintext: b64(64) }),
          })
        } else if (op === 'decrypt') {
          const { keyVersion: _v, ...envelope } = await api.post('/encrypt', {
            keyId: encryptionKey,
            plaintext: b64(64),
          })
          cycle.push({ method: 'POST', path: `${V1}/decrypt`, body: json(envelope) })
        } else if (op === 'sign') {
          cycle.push({ method: 'POST', path: `${V1}/sign`, body: json({ keyId: signingKey, message }) })
        } else if (op === 'verify') {
          const { signature } = await api.post('/sign', { keyId: signingKey, message })
          cycle.push({
            method: 'POST',
            path: `${V1}/verify`,
            body: json({ keyId: signingKey, message, signature }),
          })
        } else {
          // Admin reads alternate between one key and the first page of the list.
          cycle.push({
            method: 'GET',
            path: reads++ % 2 === 0 ? `${V1}/keys/${encryptionKey}` : `${V1}/keys?limit=20`,
          })
        }
      }
      // The floor does what the mixed ceiling does for each request: the same five operations.
      const work = {
        encrypt: { kind: 'encrypt', bytes: 64 },
        decrypt: { kind: 'decrypt', bytes: 64 },
        sign: { kind: 'sign', algorithm: 'ML-DSA-65' },
        verify: { kind: 'verify', algorithm: 'ML-DSA-65' },
        read: undefined,
      } as const satisfies Record<(typeof MIXED_CYCLE)[number], CeilingWork | undefined>
      return {
        cycle,
        // Reads are not audited (spec: cryptographic operations and changes are).
        auditRecords: rounds.map((op) => (op === 'read' ? 0 : 1)),
        floorWork: rounds.map((op) => work[op]),
      }
    },
  },
]
