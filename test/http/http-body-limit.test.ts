import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { startTestService, type TenantWithKey, type TestService } from '../helpers/service.ts'

/**
 * A body over the limit always gets its 413, also from clients that do not wait for
 * `100 Continue` and keep sending: the service reads the rest of the declared body (up to a
 * bound) before it closes, so no TCP reset discards the answer.
 */

import { ENCRYPT_JSON_BODY_LIMIT_BYTES as ENCRYPT_JSON_LIMIT } from '../../src/crypto/crypto-schemas.ts'

let svc: TestService
let tenant: TenantWithKey

before(async () => {
  svc = await startTestService()
  tenant = await svc.createTenant()
})
after(async () => {
  await svc?.stop()
})

interface RawAnswer {
  status: number
  headers: Record<string, string>
  body: string
  error?: string
}

/**
 * Sends the head and all `bodyBytes` bytes without waiting for an answer, and reads only once
 * everything is sent (as a client busy sending does), then until the server closes.
 */
function rawPost(
  path: string,
  bodyBytes: number,
  options: { chunked?: boolean; key?: string; declared?: number } = {},
): Promise<RawAnswer> {
  const url = new URL(svc.baseUrl)
  return new Promise((resolve) => {
    const socket = connect({ host: url.hostname, port: Number(url.port) })
    const received: Buffer[] = []
    let error: string | undefined
    let done = false
    const parse = (): RawAnswer | undefined => {
      const text = Buffer.concat(received).toString('latin1')
      const split = text.indexOf('\r\n\r\n')
      if (split < 0) return undefined
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const colon = line.indexOf(':')
        if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
      }
      let body = text.slice(split + 4)
      if (headers['transfer-encoding'] === 'chunked') body = dechunk(body)
      else if (body.length < Number(headers['content-length'] ?? 0)) return undefined
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0)
      return { status, headers, body, ...(error ? { error } : {}) }
    }
    const finish = (answer: RawAnswer) => {
      if (done) return
      done = true
      socket.destroy()
      resolve(answer)
    }
    // A keep-alive answer leaves the connection open: a complete answer ends the wait.
    socket.on('data', (chunk) => {
      received.push(chunk)
      const answer = parse()
      if (answer) finish(answer)
    })
    socket.on('error', (e) => {
      error = (e as NodeJS.ErrnoException).code ?? e.message
    })
    socket.on('close', () =>
      finish(parse() ?? { status: 0, headers: {}, body: '', ...(error ? { error } : {}) }),
    )
    socket.pause()
    socket.on('connect', () => {
      const framing = options.chunked
        ? 'Transfer-Encoding: chunked'
        : `Content-Length: ${options.declared ?? bodyBytes}`
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nX-Api-Key: ${options.key ?? tenant.key}\r\n` +
          `Content-Type: application/json\r\n${framing}\r\n\r\n`,
      )
      const piece = Buffer.alloc(64 * 1024, 0x20)
      let left = bodyBytes
      const pump = () => {
        while (left > 0) {
          const n = Math.min(left, piece.length)
          left -= n
          const data = options.chunked
            ? Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), piece.subarray(0, n), Buffer.from('\r\n')])
            : piece.subarray(0, n)
          if (socket.destroyed) return
          if (!socket.write(data)) {
            socket.once('drain', pump)
            return
          }
        }
        if (options.chunked && !socket.destroyed) socket.write('0\r\n\r\n')
        if (!socket.destroyed) socket.write('', () => socket.resume())
      }
      pump()
    })
  })
}

function dechunk(text: string): string {
  let out = ''
  let rest = text
  for (;;) {
    const eol = rest.indexOf('\r\n')
    if (eol < 0) return out
    const size = Number.parseInt(rest.slice(0, eol), 16)
    if (!size) return out
    out += rest.slice(eol + 2, eol + 2 + size)
    rest = rest.slice(eol + 4 + size)
  }
}

function assertComplete413(answer: RawAnswer, limit: number, attempt: number) {
  assert.equal(answer.status, 413, `attempt ${attempt}: status (${answer.error ?? 'no socket error'})`)
  const body = JSON.parse(answer.body) as { error: string; message: string }
  assert.equal(body.error, 'payload_too_large', `attempt ${attempt}`)
  assert.match(body.message, new RegExp(`limit of ${limit} bytes`), `attempt ${attempt}`)
}

describe('a body over the limit without Expect: 100-continue', () => {
  test('the admin API answers a complete 413 JSON body every time (30 tries, 8 MiB each)', async () => {
    const limit = svc.config.bodyLimitBytes
    for (let attempt = 1; attempt <= 30; attempt++) {
      assertComplete413(await rawPost('/api/v1/keys', 8 * 1024 * 1024), limit, attempt)
    }
  })

  test('encrypt answers a complete 413 naming its own limit for a 24 MiB body (10 tries)', async () => {
    for (let attempt = 1; attempt <= 10; attempt++) {
      assertComplete413(await rawPost('/api/v1/encrypt', 24 * 1024 * 1024), ENCRYPT_JSON_LIMIT, attempt)
    }
  })

  test('a chunked body over the limit gets a complete 413 too (10 tries)', async () => {
    const limit = svc.config.bodyLimitBytes
    for (let attempt = 1; attempt <= 10; attempt++) {
      assertComplete413(await rawPost('/api/v1/keys', 8 * 1024 * 1024, { chunked: true }), limit, attempt)
    }
  })

  test('a client that declares 1 GiB and waits before sending gets its 413 without sending it', async () => {
    const answer = await rawPost('/api/v1/keys', 0, { declared: 1024 * 1024 * 1024 })
    assertComplete413(answer, svc.config.bodyLimitBytes, 1)
  })

  test('a large body without a valid key gets its complete 401 (10 tries)', async () => {
    for (let attempt = 1; attempt <= 10; attempt++) {
      const answer = await rawPost('/api/v1/keys', 8 * 1024 * 1024, { key: 'kms_wrong' })
      assert.equal(answer.status, 401, `attempt ${attempt}: status (${answer.error ?? 'no socket error'})`)
      assert.equal((JSON.parse(answer.body) as { error: string }).error, 'unauthorized')
    }
  })

  test('the service stays healthy', async () => {
    const health = await svc.request('GET', '/api/v1/health')
    assert.equal(health.status, 200)
  })
})
