/**
 * X-Wing (src/crypto/xwing.ts) against ML-KEM-768 alone, straight on node:crypto in one process
 * and one run: encapsulation and decapsulation ops/s of each, the X25519 and SHA3 work X-Wing
 * adds, and the one-off cost of expanding a seed into a key (a key-object-cache miss) and of
 * parsing a 1216-byte public key. Rounds alternate between the contestants, so drift of the
 * machine (frequency, other load) lands on both; the median round is printed.
 *
 *   node bench/xwing.ts                 (ROUNDS=7 MS=400 to change the size; a few seconds by default)
 */
import {
  createPrivateKey,
  createPublicKey,
  decapsulate,
  diffieHellman,
  encapsulate,
  generateKeyPairSync,
  randomBytes,
} from 'node:crypto'
import { performance } from 'node:perf_hooks'
import {
  xwingDecapsulate,
  xwingEncapsulate,
  xwingGenerateKey,
  xwingKeyFromSeed,
  xwingPublicKey,
} from '../src/crypto/xwing.ts'

const ROUNDS = Number(process.env['ROUNDS'] ?? 7)
const MS = Number(process.env['MS'] ?? 400)

interface Contestant {
  name: string
  run: () => unknown
  rates: number[]
  cpuMicros: number[]
}

/**
 * Operations per wall-clock second of `run` over about `ms` milliseconds (whole batches of 16),
 * and the process CPU time per operation (user + system): on a shared machine the CPU time
 * moves much less than the rate.
 */
function measure(run: () => unknown, ms: number): { rate: number; cpuMicros: number } {
  let done = 0
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  let elapsed = 0
  while (elapsed < ms) {
    for (let i = 0; i < 16; i++) run()
    done += 16
    elapsed = performance.now() - started
  }
  const cpu = process.cpuUsage(cpuBefore)
  return { rate: (done / elapsed) * 1000, cpuMicros: (cpu.user + cpu.system) / done }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

// ---- the keys ----------------------------------------------------------------------------------
const { seed, privateKey: xwingKey } = xwingGenerateKey()
const { ciphertext: xwingCiphertext } = xwingEncapsulate(xwingKey.publicKey)
const mlKem = generateKeyPairSync('ml-kem-768')
const { ciphertext: mlKemCiphertext } = encapsulate(mlKem.publicKey)
const x25519Static = generateKeyPairSync('x25519')
const mlKemSeed = randomBytes(64)

const groups: { title: string; contestants: Contestant[] }[] = [
  {
    title: 'encapsulate',
    contestants: [
      { name: 'ML-KEM-768', run: () => encapsulate(mlKem.publicKey), rates: [], cpuMicros: [] },
      { name: 'X-Wing', run: () => xwingEncapsulate(xwingKey.publicKey), rates: [], cpuMicros: [] },
      {
        // What X-Wing adds to ML-KEM on this side: an ephemeral X25519 key, its public half, one DH.
        name: '  of which X25519 (ephemeral key + DH)',
        run: () => {
          const ephemeral = createPrivateKey({
            key: randomBytes(32),
            format: 'raw-private',
            asymmetricKeyType: 'x25519',
          })
          createPublicKey(ephemeral).export({ format: 'raw-public' })
          return diffieHellman({ privateKey: ephemeral, publicKey: x25519Static.publicKey })
        },
        rates: [],
        cpuMicros: [],
      },
    ],
  },
  {
    title: 'decapsulate',
    contestants: [
      {
        name: 'ML-KEM-768',
        run: () => decapsulate(mlKem.privateKey, mlKemCiphertext),
        rates: [],
        cpuMicros: [],
      },
      { name: 'X-Wing', run: () => xwingDecapsulate(xwingKey, xwingCiphertext), rates: [], cpuMicros: [] },
      {
        name: '  of which X25519 (parse ct_X + DH)',
        run: () =>
          diffieHellman({
            privateKey: x25519Static.privateKey,
            publicKey: createPublicKey({
              key: xwingCiphertext.subarray(1088),
              format: 'raw-public',
              asymmetricKeyType: 'x25519',
            }),
          }),
        rates: [],
        cpuMicros: [],
      },
    ],
  },
  {
    title: 'one-off (cache miss)',
    contestants: [
      {
        name: 'ML-KEM-768 key from its 64-byte seed',
        run: () => createPrivateKey({ key: mlKemSeed, format: 'raw-seed', asymmetricKeyType: 'ml-kem-768' }),
        rates: [],
        cpuMicros: [],
      },
      {
        name: 'X-Wing key from its 32-byte seed',
        run: () => xwingKeyFromSeed(seed),
        rates: [],
        cpuMicros: [],
      },
      {
        name: 'X-Wing public key from 1216 bytes',
        run: () => xwingPublicKey(xwingKey.publicKey.bytes),
        rates: [],
        cpuMicros: [],
      },
    ],
  },
]

console.log(
  `node ${process.version}, OpenSSL ${process.versions.openssl}; ${ROUNDS} alternating rounds of ${MS} ms each`,
)
for (const group of groups) for (const c of group.contestants) measure(c.run, 50) // warm-up
for (let round = 0; round < ROUNDS; round++) {
  for (const group of groups) {
    for (const c of group.contestants) {
      const { rate, cpuMicros } = measure(c.run, MS)
      c.rates.push(rate)
      c.cpuMicros.push(cpuMicros)
    }
  }
}

for (const group of groups) {
  console.log(`\n${group.title}`)
  const baseRate = median(group.contestants[0]!.rates)
  const baseCpu = median(group.contestants[0]!.cpuMicros)
  for (const c of group.contestants) {
    const ops = median(c.rates)
    const cpu = median(c.cpuMicros)
    console.log(
      `  ${c.name.padEnd(40)} ${Math.round(ops).toString().padStart(7)} ops/s (${(ops / baseRate).toFixed(2)}×)` +
        `  ${cpu.toFixed(1).padStart(7)} CPU µs/op (${(cpu / baseCpu).toFixed(2)}×)` +
        `  rounds ${Math.round(Math.min(...c.rates))}-${Math.round(Math.max(...c.rates))} ops/s`,
    )
  }
}
console.log('\n(×: against the first row of its group; medians of the rounds)')
