import { EntropyRejection, type FailureReason, failure, rejection } from './source-errors.ts'

export interface JsonGet {
  url: URL
  headers: Record<string, string>
  timeoutMs: number
  /** Bodies above this are refused unread: a source must not be able to make us buffer megabytes. */
  maxBodyBytes: number
  /** Aborted when the chain closes. */
  signal: AbortSignal
}

function statusReason(status: number): FailureReason {
  if (status === 401 || status === 403) return 'unauthorized'
  if (status === 429) return 'rate_limited'
  if (status >= 500) return 'server_error'
  return 'http_status'
}

function transportFailure(timeout: AbortSignal) {
  return failure(timeout.aborted ? 'timeout' : 'network')
}

async function readCapped(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<Buffer> {
  const reader = body.getReader()
  const chunks: Uint8Array[] = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > maxBytes) {
      await reader.cancel().catch(() => {})
      throw rejection('oversized')
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks, total)
}

/**
 * One GET that must answer 200 with a JSON body, within `timeoutMs` for the whole exchange
 * (headers and body). Redirects are failures, not followed: a redirect could send the
 * credential header to another host, and a QRNG endpoint has no reason to move.
 */
export async function getJson(request: JsonGet): Promise<unknown> {
  const timeout = AbortSignal.timeout(request.timeoutMs)
  const signal = AbortSignal.any([request.signal, timeout])
  let response: Response
  try {
    response = await fetch(request.url, {
      method: 'GET',
      headers: request.headers,
      redirect: 'manual',
      signal,
    })
  } catch {
    throw transportFailure(timeout)
  }
  let consumed = false
  try {
    if (response.status >= 300 && response.status < 400) throw failure('redirect')
    if (response.status !== 200) throw failure(statusReason(response.status))
    const declared = Number(response.headers.get('content-length') ?? '0')
    if (declared > request.maxBodyBytes) throw rejection('oversized')
    let raw: Buffer
    consumed = true
    try {
      raw = response.body ? await readCapped(response.body, request.maxBodyBytes) : Buffer.alloc(0)
    } catch (error) {
      if (error instanceof EntropyRejection) throw error
      throw transportFailure(timeout)
    }
    let text: string
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(raw)
    } catch {
      throw rejection('invalid_json')
    } finally {
      // The body is entropy; the string copy cannot be wiped, this buffer can.
      raw.fill(0)
    }
    try {
      return JSON.parse(text)
    } catch {
      throw rejection('invalid_json')
    }
  } finally {
    // An unread body keeps the connection busy until it is drained or cancelled.
    if (!consumed) await response.body?.cancel().catch(() => {})
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A count that real services send as a number or, for AQN, sometimes as a decimal string. */
export function lenientCount(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined
  if (typeof value === 'string' && /^\s*\d{1,9}\s*$/.test(value)) return Number(value)
  return undefined
}

/** `base` with `path` appended to its own path (a base may sit under a prefix, e.g. behind a proxy). */
export function endpoint(base: URL, path: string, query: Record<string, string>): URL {
  const url = new URL(base)
  url.pathname = base.pathname.replace(/\/+$/, '') + path
  url.search = new URLSearchParams(query).toString()
  return url
}
