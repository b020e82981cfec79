import { randomBytes } from 'node:crypto'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A local OpenAI-compatible chat-completions endpoint (`POST /v1/chat/completions` on 127.0.0.1,
 * a free port) for the model tag engine's tests. It checks the bearer key, records every request
 * and answers according to its mode:
 * - `ok`: a chat.completion whose `message.content` is `{"suggestions": [...]}`: the answer set by
 *   setAnswer, or suggestions derived from the user message (one per word of the key's name);
 * - `slow`: holds the request and never answers, until releaseSlow() (answers as `ok`, after the
 *   client has given up) or stop();
 * - `malformed`: `message.content` that is not JSON;
 * - `wrong-shape`: JSON content that is not `{"suggestions": [...]}`;
 * - `refuse`: `message.refusal` set and `content` null, as OpenAI answers a refusal;
 * - `http-500`, `http-429` (with retry-after), `unauthorized` (401): OpenAI-style error bodies;
 * - `oversize`: a 200 whose body is larger than the engine reads (300 KiB).
 * A missing or wrong bearer key is a 401 in every mode; like OpenAI's, its message echoes the key
 * it was given, so a test can check that nothing the endpoint says reaches a caller.
 */

export type FakeChatMode =
  | 'ok'
  | 'slow'
  | 'malformed'
  | 'wrong-shape'
  | 'refuse'
  | 'http-500'
  | 'http-429'
  | 'unauthorized'
  | 'oversize'

export interface ReceivedRequest {
  method: string
  path: string
  authorization: string | undefined
  contentType: string | undefined
  /** The raw body as sent. */
  raw: string
  /** The parsed body (undefined when it was not JSON). */
  body: unknown
}

export interface FakeChatCompletions {
  /** The API root to give the engine: http://127.0.0.1:<port>/v1 */
  readonly baseUrl: string
  /** The bearer key the fake accepts. */
  readonly apiKey: string
  setMode(mode: FakeChatMode): void
  /** The suggestions `ok` answers with (any JSON, to test validation); null: derive from the request. */
  setAnswer(suggestions: unknown[] | null): void
  /** Parsed bodies of every request received, in order. */
  readonly received: unknown[]
  /** Every request with its method, path and headers of interest. */
  readonly requests: ReceivedRequest[]
  /** Answers the requests `slow` is holding (as `ok`); returns how many there were. */
  releaseSlow(): number
  /** Requests `slow` is holding now. */
  readonly pending: number
  reset(): void
  stop(): Promise<void>
}

const MAX_REQUEST_BYTES = 1024 * 1024

export async function startFakeChatCompletions(
  options: { apiKey?: string } = {},
): Promise<FakeChatCompletions> {
  const apiKey = options.apiKey ?? `sk-fake-${randomBytes(16).toString('hex')}`
  let mode: FakeChatMode = 'ok'
  let answer: unknown[] | null = null
  const received: unknown[] = []
  const requests: ReceivedRequest[] = []
  const held = new Set<{ res: ServerResponse; body: unknown }>()

  const server = http.createServer((req, res) => {
    readBody(req).then(
      (raw) => handle(req, res, raw),
      () => {
        if (!res.headersSent) sendJson(res, 413, errorBody('request too large', 'invalid_request_error'))
      },
    )
  })

  function handle(req: IncomingMessage, res: ServerResponse, raw: string) {
    let body: unknown
    try {
      body = JSON.parse(raw)
    } catch {
      body = undefined
    }
    const path = req.url ?? ''
    requests.push({
      method: req.method ?? '',
      path,
      authorization: req.headers.authorization,
      contentType: req.headers['content-type'],
      raw,
      body,
    })
    received.push(body)

    if (req.method !== 'POST' || path !== '/v1/chat/completions') {
      return sendJson(
        res,
        404,
        errorBody(`Unknown request URL: ${req.method} ${path}`, 'invalid_request_error'),
      )
    }
    const authorization = req.headers.authorization ?? ''
    if (mode === 'unauthorized' || authorization !== `Bearer ${apiKey}`) {
      const given = authorization.replace(/^Bearer /, '')
      return sendJson(
        res,
        401,
        errorBody(`Incorrect API key provided: ${given}.`, 'invalid_request_error', 'invalid_api_key'),
      )
    }
    if (body === undefined) {
      return sendJson(
        res,
        400,
        errorBody('We could not parse the JSON body of your request.', 'invalid_request_error'),
      )
    }
    switch (mode) {
      case 'ok':
        return sendJson(res, 200, completion(body, JSON.stringify({ suggestions: answer ?? derive(body) })))
      case 'slow':
        held.add({ res, body })
        return
      case 'malformed':
        return sendJson(
          res,
          200,
          completion(body, '{"suggestions": [{"label": "payments", "reason": "the na'),
        )
      case 'wrong-shape':
        return sendJson(res, 200, completion(body, JSON.stringify({ tags: ['payments', 'production'] })))
      case 'refuse':
        return sendJson(res, 200, completion(body, null, "I'm sorry, I can't help with that request."))
      case 'http-500':
        return sendJson(
          res,
          500,
          errorBody('The server had an error while processing your request.', 'server_error'),
        )
      case 'http-429':
        res.setHeader('retry-after', '20')
        return sendJson(
          res,
          429,
          errorBody('Rate limit reached for requests.', 'requests', 'rate_limit_exceeded'),
        )
      case 'oversize':
        return sendJson(
          res,
          200,
          completion(body, JSON.stringify({ suggestions: [] }), null, 'x'.repeat(300 * 1024)),
        )
    }
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    apiKey,
    setMode: (next) => {
      mode = next
    },
    setAnswer: (next) => {
      answer = next
    },
    received,
    requests,
    releaseSlow() {
      const count = held.size
      for (const entry of held) {
        if (!entry.res.destroyed) {
          sendJson(
            entry.res,
            200,
            completion(entry.body, JSON.stringify({ suggestions: answer ?? derive(entry.body) })),
          )
        }
      }
      held.clear()
      return count
    },
    get pending() {
      return [...held].filter((entry) => !entry.res.destroyed).length
    },
    reset() {
      mode = 'ok'
      answer = null
      received.length = 0
      requests.length = 0
    },
    async stop() {
      for (const entry of held) entry.res.destroy()
      held.clear()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let length = 0
    req.on('data', (chunk: Buffer) => {
      length += chunk.length
      if (length > MAX_REQUEST_BYTES) {
        reject(new Error('too large'))
        req.destroy()
        return
      }
      chunks.push(chunk)
    })
    req.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.once('error', reject)
  })
}

function sendJson(res: ServerResponse, status: number, value: unknown) {
  const text = JSON.stringify(value)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

function errorBody(message: string, type: string, code: string | null = null) {
  return { error: { message, type, param: null, code } }
}

/** A chat.completion as OpenAI returns it; `padding` makes it as large as a test needs. */
function completion(
  request: unknown,
  content: string | null,
  refusal: string | null = null,
  padding?: string,
) {
  const model = isRecord(request) && typeof request['model'] === 'string' ? request['model'] : 'fake-model'
  return {
    id: `chatcmpl-${randomBytes(12).toString('hex')}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content, refusal, annotations: [] },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    usage: { prompt_tokens: 120, completion_tokens: 40, total_tokens: 160 },
    ...(padding === undefined ? {} : { system_fingerprint: padding }),
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** One suggestion per word (3+ letters) of the key's name, as a stand-in for a model's judgement. */
function derive(request: unknown): { label: string; reason: string }[] {
  const messages = isRecord(request) && Array.isArray(request['messages']) ? request['messages'] : []
  const user = messages.find((m: unknown) => isRecord(m) && m['role'] === 'user') as
    | Record<string, unknown>
    | undefined
  let name = ''
  try {
    const facts = JSON.parse(String(user?.['content'] ?? '{}')) as unknown
    if (isRecord(facts) && typeof facts['name'] === 'string') name = facts['name']
  } catch {
    // no name: no suggestions
  }
  const words = [...new Set(name.toLowerCase().split(/[^a-z0-9]+/))].filter((w) => w.length >= 3)
  return words.slice(0, 5).map((word) => ({ label: word, reason: `the name contains '${word}'` }))
}
