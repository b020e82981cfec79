import { type OutboundClient, OutboundError, type OutboundResponse } from '../outbound/outbound-client.ts'
import { type FailureReason, failure, rejection } from './source-errors.ts'

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

/**
 * One GET through the service's outbound client that must answer 200 with a JSON body, within
 * `timeoutMs` for the whole exchange (headers and body). Redirects are failures, not followed: a
 * redirect could send the credential header to another host, and a QRNG endpoint has no reason
 * to move.
 */
export async function getJson(http: OutboundClient, request: JsonGet): Promise<unknown> {
  let response: OutboundResponse
  try {
    response = await http.request({
      url: request.url,
      method: 'GET',
      headers: request.headers,
      timeoutMs: request.timeoutMs,
      maxResponseBytes: request.maxBodyBytes,
      oversize: 'fail',
      signal: request.signal,
    })
  } catch (error) {
    const code = error instanceof OutboundError ? error.code : 'connection_failed'
    if (code === 'response_too_large') throw rejection('oversized')
    if (code === 'timeout') throw failure('timeout')
    // The source's own host is always allowed (entropy-client.ts), so a refusal is unexpected.
    if (code === 'destination_not_allowed') throw failure('unexpected')
    throw failure('network')
  }
  const raw = response.body
  try {
    if (response.status >= 300 && response.status < 400) throw failure('redirect')
    if (response.status !== 200) throw failure(statusReason(response.status))
    let text: string
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(raw)
    } catch {
      throw rejection('invalid_json')
    }
    try {
      return JSON.parse(text)
    } catch {
      throw rejection('invalid_json')
    }
  } finally {
    // The body is entropy; the string copy cannot be wiped, this buffer can.
    raw.fill(0)
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
