/**
 * Issuing an SSH certificate (POST /api/v1/ssh/certificates, src/ssh/) against the HTTP floor
 * measured in the same run: the service as `npm start` runs it signs a user certificate for an
 * Ed25519 client key under an Ed25519 CA and under an EC P-256 CA (parse the key line, check the
 * request, resolve the CA key for the caller, sign, store the certificate, audit the issuance);
 * the floor (bench/lib/floor.ts) does the same signature per request and answers with the
 * service's status, content type and size, driven by the same load generator over the same
 * connections. `÷ floor` is what the service's own work costs. The audit log must hold exactly
 * one `crypto.ssh_certificate_issue` record per certificate answered.
 *
 *   node bench/ssh-certificate.ts [--seconds=5] [--connections=32] [--processes=N]
 */
import { generateKeyPairSync } from 'node:crypto'
import { availableParallelism } from 'node:os'
import type { CeilingWork } from './lib/ceiling-work.ts'
import { cpuBetween, readCpu } from './lib/cpu-usage.ts'
import { startFloor } from './lib/floor.ts'
import { type RequestSpec, runLoad } from './lib/load.ts'
import { auditTotals, checkAudit, measureFloor, probeAnswers } from './lib/measure.ts'
import type { Scenario } from './lib/scenarios.ts'
import { freePort, startServiceUnderTest } from './lib/service-under-test.ts'
import { setupApi } from './lib/setup-api.ts'

const option = (name: string, fallback: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback
const seconds = Number(option('seconds', '5'))
const connections = Number(option('connections', '32'))
const processes = Number(option('processes', '0'))
if (!(seconds > 0 && connections > 0 && processes >= 0))
  throw new Error('bad --seconds, --connections or --processes')

const CASES: { id: string; title: string; caAlgorithm: string; ceiling: CeilingWork }[] = [
  {
    id: 'ssh-cert-ed25519',
    title: 'SSH user certificate, Ed25519 CA',
    caAlgorithm: 'Ed25519',
    ceiling: { kind: 'sign', algorithm: 'Ed25519' },
  },
  {
    id: 'ssh-cert-ec-p256',
    title: 'SSH user certificate, EC P-256 CA',
    caAlgorithm: 'EC-P256',
    ceiling: { kind: 'sign', algorithm: 'EC-P256' },
  },
]

/** An Ed25519 client key as the `.pub` line a client sends (string "ssh-ed25519", string key). */
function clientKeyLine(): string {
  const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x!
  const field = (bytes: Buffer) => {
    const length = Buffer.alloc(4)
    length.writeUInt32BE(bytes.length)
    return Buffer.concat([length, bytes])
  }
  const blob = Buffer.concat([field(Buffer.from('ssh-ed25519')), field(Buffer.from(raw, 'base64url'))])
  return `ssh-ed25519 ${blob.toString('base64')} bench@client`
}

const log = (text: string) => process.stdout.write(`${text}\n`)
log(
  `SSH certificate issuance: ${connections} connections, ${seconds} s measured per case, ` +
    `${availableParallelism()} cores, node ${process.version}`,
)

const rows: string[] = []
let failed = false
const floor = await startFloor({ processes: 1, port: await freePort() })
const svc = await startServiceUnderTest(processes > 0 ? { apiProcesses: processes } : {})
try {
  for (const scenario of CASES) {
    const tenant = await svc.createTenant()
    const api = setupApi(svc.baseUrl, tenant)
    const ca = await api.post('/ssh/ca', { type: 'user', algorithm: scenario.caAlgorithm })
    const cycle: RequestSpec[] = [
      {
        method: 'POST',
        path: '/api/v1/ssh/certificates',
        body: JSON.stringify({
          caId: ca['id'],
          publicKey: clientKeyLine(),
          principals: ['deploy'],
          validitySeconds: 3600,
        }),
      },
    ]
    const base = { baseUrl: svc.baseUrl, apiKey: tenant.apiKey, connections, cycle }
    // Warm: JIT, connections, the key caches; its rate sizes the measured run. By amount, so
    // every warm-up request is answered (and audited) before the measured run's count starts.
    const warm = await runLoad({ ...base, amount: connections * 40 })
    if (warm.non2xx > 0 || warm.errors > 0)
      throw new Error(`${scenario.id}: ${JSON.stringify(warm.statusCodes)}`)
    const before = await auditTotals(svc, tenant.tenantId)
    const pids = svc.apiPids()
    const cpuBefore = readCpu(pids)
    const load = await runLoad({ ...base, amount: warm.requestsPerSecond * seconds })
    const apiUs = (cpuBetween(cpuBefore, readCpu(pids)) * 1e6) / load.ok
    const audit = await checkAudit(svc, tenant.tenantId, before, load, [1], 1)
    if (audit.failure) {
      failed = true
      log(`  ${scenario.id}: ${audit.failure}`)
    }

    const answers = await probeAnswers(svc.baseUrl, tenant.apiKey, cycle)
    const asScenario: Scenario = {
      id: scenario.id,
      title: scenario.title,
      ceiling: scenario.ceiling,
      itemsPerRequest: 1,
      connections,
      seconds: { quick: seconds, full: seconds },
      prepare: async () => ({ cycle, auditRecords: [1] }),
    }
    const measured = await measureFloor(
      [floor],
      asScenario,
      { cycle, auditRecords: [1] },
      answers,
      tenant.apiKey,
      {
        connections,
        seconds,
        warmSeconds: 2,
      },
    )
    const ratio = load.requestsPerSecond / measured.load.requestsPerSecond
    log(
      `  ${scenario.title}: ${Math.round(load.requestsPerSecond)} req/s (p50 ${load.latency.p50.toFixed(1)} ms, ` +
        `p99 ${load.latency.p99.toFixed(1)} ms), floor ${Math.round(measured.load.requestsPerSecond)} req/s, ` +
        `÷ floor ${(ratio * 100).toFixed(0)}%, API ${apiUs.toFixed(0)} µs/req, floor ${measured.floorUs.toFixed(0)} µs/req, audit ${audit.text}`,
    )
    rows.push(
      `| ${scenario.title} | ${Math.round(load.requestsPerSecond).toLocaleString('en')} | ` +
        `${load.latency.p50.toFixed(1)} / ${load.latency.p99.toFixed(1)} | ` +
        `${Math.round(measured.load.requestsPerSecond).toLocaleString('en')} | ${(ratio * 100).toFixed(0)}% | ` +
        `${apiUs.toFixed(0)} | ${measured.floorUs.toFixed(0)} | ${audit.text} |`,
    )
  }
} finally {
  await svc.stop()
  await floor.stop()
}

log('\n| case | req/s | p50 / p99 ms | floor req/s | ÷ floor | API CPU µs/req | floor CPU µs/req | audit |')
log('|---|--:|--:|--:|--:|--:|--:|---|')
for (const row of rows) log(row)
process.exit(failed ? 1 : 0)
