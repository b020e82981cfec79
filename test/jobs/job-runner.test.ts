import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import type { JobsConfig } from '../../src/config.ts'
import { createJobQueue, type JobQueueClient, mailQueueOn } from '../../src/jobs/job-queue.ts'
import { type JobRunner, startJobRunner } from '../../src/jobs/job-runner.ts'
import type { ModuleJobs, QueuedJob } from '../../src/platform/module.ts'
import { waitFor } from '../helpers/service.ts'

/**
 * The job runner over modules it knows nothing of (src/platform/module.ts): two fake modules, on
 * the real Redis under a key prefix of this file's own. No timing is asserted: each check polls,
 * with a bound, until the state it waits for is reached.
 */

const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379'
const PREFIX = `kms-job-runner-test-${randomBytes(4).toString('hex')}:`
const NAMESPACE = 'ns'
const QUEUE_PREFIX = `${PREFIX}jobs:${NAMESPACE}`
const config: JobsConfig = {
  sweepMs: 100,
  concurrency: 2,
  tenantConcurrency: 1,
  webhookTimeoutMs: 1000,
  webhookRetryScale: 1,
}

interface Gate {
  promise: Promise<void>
  open(): void
}
function gate(): Gate {
  let open!: () => void
  const promise = new Promise<void>((resolve) => {
    open = resolve
  })
  return { promise, open }
}

interface Message {
  n: number
  hold?: boolean
}

const logs: Array<Record<string, unknown>> = []
const logger = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line)) })

// Module A: a sweep on each queue (one that works, one that never has anything to say).
let swept = 0
let quietSwept = 0
const moduleA: ModuleJobs = {
  sweeps: [
    {
      name: 'test-sweep',
      queue: 'maintenance',
      async run(sweepId) {
        swept++
        return { worked: true, message: 'test sweep', details: { n: swept, sweepId } }
      },
    },
    {
      name: 'test-quiet-sweep',
      queue: 'integrations',
      async run() {
        quietSwept++
        return { worked: false, message: 'quiet sweep' }
      },
    },
  ],
}

// Module B: a mail kind with its lost messages, and a queue of its own.
const delivered: Array<{ n: number; final: boolean }> = []
const holds = new Map<number, Gate>()
let lost: Array<QueuedJob<Message>> = []
let overdueCalls = 0
const handled: Array<{ name: string; payload: unknown }> = []
let consumerStopped = false
const moduleB: ModuleJobs = {
  mail: [
    {
      kind: 'test-mail',
      async deliver(payload: Message, final) {
        if (payload.n === -1) throw new Error('the mail server said no')
        if (payload.hold) {
          const held = gate()
          holds.set(payload.n, held)
          await held.promise
        }
        delivered.push({ n: payload.n, final })
        return 'sent'
      },
      async overdue(graceMs) {
        assert.equal(graceMs, 60_000, 'max(60 s, 3 × sweepMs)')
        overdueCalls++
        return lost
      },
    },
  ],
  consumers: [
    {
      queue: 'test-consumer',
      concurrency: 2,
      async handle(name, payload) {
        handled.push({ name, payload })
        return null
      },
      async stop() {
        consumerStopped = true
      },
    },
  ],
}

const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
const inspect = {
  maintenance: new Queue('maintenance', { connection: redis, prefix: QUEUE_PREFIX }),
  integrations: new Queue('integrations', { connection: redis, prefix: QUEUE_PREFIX }),
  mail: new Queue('mail', { connection: redis, prefix: QUEUE_PREFIX }),
  consumer: new Queue('test-consumer', { connection: redis, prefix: QUEUE_PREFIX }),
}
let jobQueue: JobQueueClient
let runner: JobRunner | undefined
const done: Array<{ queue: string; job: string; outcome: string }> = []

before(async () => {
  // A sweep of an earlier release, which no module declares any more.
  await inspect.maintenance.upsertJobScheduler(
    'retired-sweep',
    { every: 3_600_000 },
    { name: 'retired-sweep' },
  )
  jobQueue = createJobQueue({ redisUrl: REDIS_URL, prefix: async () => QUEUE_PREFIX, logger })
  runner = await startJobRunner({
    redisUrl: REDIS_URL,
    prefix: PREFIX,
    namespace: NAMESPACE,
    config,
    logger,
    modules: [moduleA, moduleB],
    closeTimeoutMs: 5000,
    onJobDone: (queue, job, outcome) => done.push({ queue, job, outcome }),
  })
})

after(async () => {
  for (const held of holds.values()) held.open()
  await runner?.stop()
  await jobQueue?.close()
  for (const queue of Object.values(inspect)) await queue.close()
  const keys = await redis.keys(`${PREFIX}*`)
  if (keys.length > 0) await redis.del(...keys)
  redis.disconnect()
})

describe('the job runner runs the jobs the modules declare', () => {
  test('each sweep is scheduled on its queue and runs; a sweep that worked is logged', async () => {
    await waitFor(async () => {
      const names = (await inspect.maintenance.getJobSchedulers()).map((s) => s.key).sort()
      return names.join() === ['mail-sweep', 'test-sweep'].join()
    }, 'the maintenance schedulers (the retired one removed)')
    const integrations = (await inspect.integrations.getJobSchedulers()).map((s) => s.key)
    assert.deepEqual(integrations, ['test-quiet-sweep'])
    await waitFor(() => swept >= 2 && quietSwept >= 2, 'two runs of each sweep')
    const line = logs.find((l) => l['msg'] === 'test sweep')
    assert.ok(line, 'the sweep that worked is logged with its message')
    assert.equal(typeof line['n'], 'number', 'with its details')
    assert.match(String(line['sweepId']), /^job:/, 'the sweep id names the job')
    assert.equal(
      logs.some((l) => l['msg'] === 'quiet sweep'),
      false,
      'a sweep that did nothing is not logged',
    )
    await waitFor(
      () =>
        done.some((d) => d.queue === 'maintenance' && d.job === 'test-sweep' && d.outcome === 'completed'),
      'the sweep reported to onJobDone',
    )
    assert.ok(logs.some((l) => l['msg'] === 'background jobs started'))
  })

  test('a message is delivered once, under the id it was queued with, with the queue’s attempts', async () => {
    const mail = mailQueueOn(jobQueue, 3)
    await mail.enqueue('test-mail', { n: 1, hold: true }, 'm.1')
    await waitFor(() => holds.has(1), 'the delivery to start')
    const job = await inspect.mail.getJob('m.1')
    assert.ok(job, 'the job has the id it was queued with')
    assert.equal(job.name, 'test-mail')
    assert.deepEqual(job.data, { n: 1, hold: true })
    assert.equal(job.opts.attempts, 3)
    assert.deepEqual(job.opts.backoff, { type: 'exponential', delay: 2000 })
    // Queued again while it runs: a no-op.
    await mail.enqueue('test-mail', { n: 1, hold: true }, 'm.1')
    holds.get(1)!.open()
    await waitFor(async () => (await inspect.mail.getJob('m.1')) === undefined, 'the job to complete and go')
    assert.deepEqual(
      delivered.filter((d) => d.n === 1),
      [{ n: 1, final: false }],
      'delivered once; not the last of its 3 attempts',
    )

    // With one attempt, the first is the last.
    await mailQueueOn(jobQueue, 1).enqueue('test-mail', { n: 2 }, 'm.2')
    await waitFor(() => delivered.some((d) => d.n === 2), 'the second message')
    assert.deepEqual(
      delivered.filter((d) => d.n === 2),
      [{ n: 2, final: true }],
    )
  })

  test('the mail sweep queues a lost message again under the same id, and never doubles one still queued', async () => {
    // Still queued (running): the sweep's adds are no-ops.
    await mailQueueOn(jobQueue, 3).enqueue('test-mail', { n: 3, hold: true }, 'm.3')
    await waitFor(() => holds.has(3), 'the delivery of m.3 to start')
    lost = [{ payload: { n: 3, hold: true }, id: 'm.3' }]
    let calls = overdueCalls
    await waitFor(() => overdueCalls >= calls + 2, 'two mail sweeps while m.3 runs')
    lost = []
    // A sweep run that started before the list was emptied has finished once the next one asks.
    calls = overdueCalls
    await waitFor(() => overdueCalls > calls, 'a mail sweep that sees nothing lost')
    holds.get(3)!.open()
    await waitFor(async () => (await inspect.mail.getJob('m.3')) === undefined, 'm.3 to complete')
    assert.deepEqual(
      delivered.filter((d) => d.n === 3),
      [{ n: 3, final: false }],
      'delivered once',
    )

    // Lost (its job is gone): queued again with its id and one attempt.
    lost = [{ payload: { n: 4, hold: true }, id: 'm.4' }]
    await waitFor(() => holds.has(4), 'the lost message to be queued again and run')
    const job = await inspect.mail.getJob('m.4')
    assert.ok(job, 'the same id as its first enqueue')
    assert.equal(job.name, 'test-mail')
    assert.equal(job.opts.attempts, 1)
    lost = []
    calls = overdueCalls
    await waitFor(() => overdueCalls > calls, 'a mail sweep that sees nothing lost')
    holds.get(4)!.open()
    await waitFor(() => delivered.some((d) => d.n === 4), 'the lost message delivered')
    assert.deepEqual(
      delivered.filter((d) => d.n === 4),
      [{ n: 4, final: true }],
      'one attempt: the last',
    )
    assert.ok(logs.some((l) => l['msg'] === 'mail sweep: lost messages queued again'))
  })

  test('a module’s own queue is consumed by its consumer, delayed jobs included', async () => {
    await jobQueue.enqueue('test-consumer', 'work', { x: 1 }, { id: 'c.1' })
    await jobQueue.enqueue('test-consumer', 'later', { x: 2 }, { id: 'c.2', delayMs: 200, attempts: 1 })
    await waitFor(() => handled.length >= 2, 'both jobs handled')
    assert.deepEqual(
      handled.sort((a, b) => a.name.localeCompare(b.name)),
      [
        { name: 'later', payload: { x: 2 } },
        { name: 'work', payload: { x: 1 } },
      ],
    )
  })

  test('a failed job is logged and counted; a job no module declares completes', async () => {
    await mailQueueOn(jobQueue, 1).enqueue('test-mail', { n: -1 }, 'm.fails')
    await waitFor(
      () => done.some((d) => d.queue === 'mail' && d.job === 'test-mail' && d.outcome === 'failed'),
      'the failed send reported to onJobDone',
    )
    assert.ok(logs.some((l) => l['msg'] === 'job failed' && l['job'] === 'test-mail'))
    await jobQueue.enqueue('mail', 'nobody-sends-this', {}, { id: 'm.unknown' })
    await waitFor(
      () =>
        done.some((d) => d.queue === 'mail' && d.job === 'nobody-sends-this' && d.outcome === 'completed'),
      'the unknown mail job to complete',
    )
  })

  test('stop() stops the workers and the consumers', async () => {
    await runner!.stop()
    runner = undefined
    assert.equal(consumerStopped, true, 'the consumer was told to stop')
    for (const queue of Object.values(inspect))
      await waitFor(async () => (await queue.getWorkersCount()) === 0, `no worker left on ${queue.name}`)
    // A job queued now stays queued.
    await jobQueue.enqueue('test-consumer', 'after-stop', {}, { id: 'c.3' })
    assert.equal(await inspect.consumer.getJobState('c.3'), 'waiting')
    assert.equal(
      handled.some((h) => h.name === 'after-stop'),
      false,
    )
  })
})
