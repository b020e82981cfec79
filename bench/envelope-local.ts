/**
 * Local envelope encryption with the SDK (packages/sdk: a data key from the service, AES-256-GCM
 * in 4,096-byte frames on this machine) against the service's own binary encrypt of 1 MB
 * (POST /api/v1/encrypt, application/octet-stream), side by side in items/s and MB/s, in one run:
 *
 * - service: 1 MB binary encrypts over 8 connections (the load generator of bench/lib/load.ts),
 *   against the HTTP floor doing the same encryption per request (`÷ floor`);
 * - SDK, one data key per message: each 1 MB message asks the service for a data key
 *   (POST /keys/{id}/data-key), then encrypts locally; decrypt unwraps it (POST /keys/{id}/unwrap);
 * - SDK, cached data keys (createCachingKeyring: at most 1,000 messages, 1 GiB, 5 minutes per
 *   data key): the service is asked once in a while, the rest is local;
 * - SDK, one stream of 256 MB (encryptStream / decryptStream), as `kms encrypt-file` runs it.
 *
 * The ceiling is AES-256-GCM over 1 MB (with the service's key encapsulation, which is noise at
 * this size) in node:crypto on every core (bench/lib/ceiling.ts): what this machine can encrypt.
 * The SDK runs in this one process, on WebCrypto (whose work runs on libuv's threads), and the
 * service runs beside it on the same 2 cores: read the SDK rows as a client's throughput on a
 * machine that also serves. A rate is answers ÷ time to the last answer. Every message the SDK
 * made is decrypted back and compared, so a row cannot count work that was not done right.
 *
 *   node bench/envelope-local.ts [--seconds=5] [--connections=8] [--stream-mb=256]
 */
import { randomBytes } from 'node:crypto'
import { availableParallelism } from 'node:os'
import { performance } from 'node:perf_hooks'
import {
  createCachingKeyring,
  createKmsClient,
  createServiceKeyring,
  decrypt,
  decryptStream,
  encrypt,
  encryptStream,
  type Keyring,
} from '@kms/sdk'
import { measureCeiling } from './lib/ceiling.ts'
import { startFloor } from './lib/floor.ts'
import { runLoad } from './lib/load.ts'
import { measureFloor, probeAnswers } from './lib/measure.ts'
import { SCENARIOS } from './lib/scenarios.ts'
import { freePort, startServiceUnderTest } from './lib/service-under-test.ts'
import { setupApi } from './lib/setup-api.ts'

const option = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback
const seconds = Number(option('seconds', '5'))
const connections = Number(option('connections', '8'))
const streamMb = Number(option('stream-mb', '256'))
if (!(seconds > 0 && connections > 0 && streamMb > 0))
  throw new Error('bad --seconds, --connections or --stream-mb')

const MB = 1 << 20
const log = (text: string) => process.stdout.write(`${text}\n`)
log(
  `Local envelope encryption (SDK) vs the service's 1 MB binary encrypt: ${seconds} s per row, ` +
    `${connections} connections / messages in flight, ${availableParallelism()} cores, node ${process.version}`,
)

interface Row {
  title: string
  itemsPerSecond: number
  mbPerSecond: number
  note: string
}
const rows: Row[] = []
const ceiling = await measureCeiling({ kind: 'encrypt', bytes: MB }, { durationMs: 2000 })
const ceilingMbps = ceiling.opsPerSecond
log(`  ceiling: AES-256-GCM 1 MB on ${ceiling.threads} threads: ${ceilingMbps.toFixed(0)} MB/s`)

/**
 * Runs `work` on `inFlight` messages at a time for about `seconds`, then waits for the last one:
 * the rate is messages done ÷ time to the last answer.
 */
async function messagesPerSecond(inFlight: number, work: () => Promise<void>): Promise<number> {
  const started = performance.now()
  const deadline = started + seconds * 1000
  let done = 0
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < deadline) {
        await work()
        done++
      }
    }),
  )
  return done / ((performance.now() - started) / 1000)
}

const floor = await startFloor({ processes: 1, port: await freePort() })
const svc = await startServiceUnderTest({})
try {
  const tenant = await svc.createTenant()
  const api = setupApi(svc.baseUrl, tenant)

  // The service's own 1 MB binary encrypt, and the HTTP floor doing the same work per request.
  const scenario = SCENARIOS.find((candidate) => candidate.id === 'encrypt-1-mb-binary')
  if (!scenario) throw new Error('bench/lib/scenarios.ts has no encrypt-1-mb-binary scenario')
  const prepared = await scenario.prepare(api)
  const base = { baseUrl: svc.baseUrl, apiKey: tenant.apiKey, connections, cycle: prepared.cycle }
  const warm = await runLoad({ ...base, amount: connections * 10 })
  if (warm.non2xx > 0 || warm.errors > 0)
    throw new Error(`service warm-up: ${JSON.stringify(warm.statusCodes)}`)
  const load = await runLoad({
    ...base,
    amount: Math.max(connections, Math.round(warm.requestsPerSecond * seconds)),
  })
  if (load.non2xx > 0 || load.errors > 0) throw new Error(`service: ${JSON.stringify(load.statusCodes)}`)
  const answers = await probeAnswers(svc.baseUrl, tenant.apiKey, prepared.cycle)
  const measured = await measureFloor([floor], scenario, prepared, answers, tenant.apiKey, {
    connections,
    seconds,
    warmSeconds: 2,
  })
  rows.push({
    title: 'service: POST /encrypt, 1 MB binary (ML-KEM-768 key)',
    itemsPerSecond: load.requestsPerSecond,
    mbPerSecond: load.requestsPerSecond,
    note: `÷ floor ${((load.requestsPerSecond / measured.load.requestsPerSecond) * 100).toFixed(0)}% (floor ${measured.load.requestsPerSecond.toFixed(0)} req/s)`,
  })

  // The SDK against the same service, with a key of the same type.
  const keyId = await api.createKey('Encryption', 'ML-KEM-768')
  const client = createKmsClient({ baseUrl: svc.baseUrl, apiKey: tenant.apiKey })
  const perMessage = createServiceKeyring(client, { keyIds: [keyId] })
  const cached = createCachingKeyring(perMessage, { maxAgeMs: 300_000, maxMessages: 1000, maxBytes: 1 << 30 })
  const context = { app: 'bench', purpose: 'envelope-local' }
  const plaintexts = Array.from({ length: 4 }, () => new Uint8Array(randomBytes(MB)))

  // 4 KB frames (the format's default) and 64 KB frames: WebCrypto's cost is per call, so the frame
  // length sets the local throughput (--frame-length of kms encrypt-file).
  for (const [label, keyring, frameLength] of [
    ['one data key per message', perMessage, 4096],
    ['cached data keys', cached, 4096],
    ['cached data keys, 64 KB frames', cached, 65536],
  ] as [string, Keyring, number][]) {
    const messages: { message: Uint8Array; from: Uint8Array }[] = []
    let turn = 0
    const encryptRate = await messagesPerSecond(connections, async () => {
      const from = plaintexts[turn++ % plaintexts.length]!
      const message = await encrypt(keyring, from, { context, frameLength })
      if (messages.length < 16) messages.push({ message, from })
    })
    let check = 0
    const decryptRate = await messagesPerSecond(connections, async () => {
      const index = check++ % messages.length
      const { plaintext } = await decrypt(keyring, messages[index]!.message, { expectedContext: context })
      if (plaintext.length !== MB)
        throw new Error(`${label}: a message decrypted to ${plaintext.length} bytes`)
    })
    // Every kept message decrypts to the plaintext it was made from.
    for (const [index, { message, from }] of messages.entries()) {
      const { plaintext } = await decrypt(keyring, message)
      if (Buffer.compare(plaintext, from) !== 0)
        throw new Error(`${label}: message ${index} did not decrypt to its plaintext`)
    }
    for (const [operation, rate] of [
      ['encrypt', encryptRate],
      ['decrypt', decryptRate],
    ] as const) {
      rows.push({
        title: `SDK ${operation}, 1 MB messages, ${label}`,
        itemsPerSecond: rate,
        mbPerSecond: rate,
        note: `÷ ceiling ${((rate / ceilingMbps) * 100).toFixed(0)}%`,
      })
    }
  }

  // One long stream, as kms encrypt-file does: 1 MB chunks in, frames out, nothing kept.
  const chunk = plaintexts[0]!
  const source = () =>
    new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ === streamMb) controller.close()
        else controller.enqueue(chunk)
      },
    })
  let sent = 0
  for (const frameLength of [4096, 65536]) {
    sent = 0
    let encryptedBytes = 0
    const kept: Uint8Array[] = []
    let started = performance.now()
    await source()
      .pipeThrough(encryptStream(perMessage, { context, frameLength }))
      .pipeTo(
        new WritableStream({
          write(piece) {
            encryptedBytes += piece.length
            // The first 8 MB of the message is kept to check that it decrypts (frames stream in order).
            if (encryptedBytes <= 8 * MB) kept.push(piece)
          },
        }),
      )
    const streamEncryptMbps = streamMb / ((performance.now() - started) / 1000)
    rows.push({
      title: `SDK encryptStream, one ${streamMb} MB stream, ${frameLength / 1024} KB frames`,
      itemsPerSecond: 1 / (streamMb / streamEncryptMbps),
      mbPerSecond: streamEncryptMbps,
      note: `÷ ceiling ${((streamEncryptMbps / ceilingMbps) * 100).toFixed(0)}%; ${(encryptedBytes / MB).toFixed(1)} MB out`,
    })

    // Decrypt a whole stream: encrypt it again into a buffer-free pipe, then decrypt, counting bytes.
    sent = 0
    let decryptedBytes = 0
    started = performance.now()
    await source()
      .pipeThrough(encryptStream(perMessage, { context, frameLength }))
      .pipeThrough(decryptStream(perMessage, { expectedContext: context }))
      .pipeTo(
        new WritableStream({
          write(piece) {
            decryptedBytes += piece.length
          },
        }),
      )
    if (decryptedBytes !== streamMb * MB) throw new Error(`stream round trip gave ${decryptedBytes} bytes`)
    const roundTripMbps = streamMb / ((performance.now() - started) / 1000)
    rows.push({
      title: `SDK encryptStream → decryptStream, one ${streamMb} MB stream, ${frameLength / 1024} KB frames`,
      itemsPerSecond: 1 / (streamMb / roundTripMbps),
      mbPerSecond: roundTripMbps,
      note: 'both directions in one pipe (each byte encrypted and decrypted)',
    })
    // The kept head of the first stream is a valid beginning of a message: the header and the first
    // frames decrypt (a truncated message must fail at its end, and only there).
    const head = new Uint8Array(Buffer.concat(kept))
    const headOut = await decrypt(perMessage, head).then(
      () => 'decrypted whole (wrong: the final frame is missing)',
      (err: Error & { code?: string }) => err.code,
    )
    if (headOut !== 'truncated') throw new Error(`the head of the stream: ${headOut}`)
  }
} finally {
  await svc.stop()
  await floor.stop()
}

log('\n| case | items/s | MB/s | note |')
log('|---|--:|--:|---|')
for (const row of rows)
  log(
    `| ${row.title} | ${row.itemsPerSecond < 10 ? row.itemsPerSecond.toFixed(2) : Math.round(row.itemsPerSecond).toLocaleString('en')} | ` +
      `${Math.round(row.mbPerSecond).toLocaleString('en')} | ${row.note} |`,
  )
process.exit(0)
