import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { startTestService, type TestService } from './helpers/service.ts'

/** /metrics per process: who answered, its memory and its event-loop delay window. */

let svc: TestService
before(async () => {
  svc = await startTestService()
})
after(async () => {
  await svc?.stop()
})

function sample(text: string, series: string): number {
  const escaped = series.replace(/[{}"=.]/g, (c) => `\\${c}`)
  const match = new RegExp(`^${escaped} (\\S+)$`, 'm').exec(text)
  assert.ok(match, `${series} in\n${text}`)
  return Number(match[1])
}

async function scrape(): Promise<string> {
  const res = await svc.request('GET', '/metrics')
  assert.equal(res.status, 200)
  return res.text
}

test('names the process that answered and its memory', async () => {
  const text = await scrape()
  // The test service runs in this process.
  assert.equal(sample(text, 'process_pid'), process.pid)
  assert.ok(sample(text, 'process_resident_memory_bytes') > 0)
  for (const kind of ['heap_total', 'heap_used', 'external', 'array_buffers']) {
    assert.ok(sample(text, `nodejs_memory_bytes{kind="${kind}"}`) >= 0, kind)
  }
  assert.ok(
    sample(text, 'nodejs_memory_bytes{kind="heap_used"}') <=
      sample(text, 'nodejs_memory_bytes{kind="heap_total"}'),
  )
})

test('the event-loop delay window shows a loop that was held', async () => {
  await scrape() // starts a fresh window
  // Hold this process's event loop (the service's too) for 200 ms.
  const until = Date.now() + 200
  while (Date.now() < until) {}
  const text = await scrape()
  const quantiles = ['0.5', '0.9', '0.99', '1'].map((q) =>
    sample(text, `nodejs_eventloop_delay_seconds{quantile="${q}"}`),
  )
  assert.ok(quantiles.every((v) => v >= 0))
  assert.deepEqual(
    [...quantiles].sort((a, b) => a - b),
    quantiles,
    'quantiles are ordered',
  )
  assert.ok(quantiles[3]! >= 0.15, `the held loop shows as a delay of at least 150 ms, got ${quantiles[3]}`)
})
