import type { IncomingHttpHeaders } from 'node:http'
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib'
import {
  createHttpHeaders,
  type HttpClient,
  type HttpHeaders,
  type PipelineRequest,
  type PipelineResponse,
} from '@azure/core-rest-pipeline'
import { type OutboundClient, OutboundError, type OutboundRequest } from '../../outbound/outbound-client.ts'

/**
 * The Azure SDKs' transport (`HttpClient` of @azure/core-rest-pipeline) over the guarded
 * outbound client, so that the Key Vault client and MSAL (inside @azure/identity) reach Azure only
 * through src/outbound: address checks, pinning, no redirects, deadlines, response caps.
 *
 * Each exchange is also noted in a journal. The SDKs wrap failures in their own errors (MSAL
 * turns a refused token request into an AuthenticationRequiredError carrying the server's
 * text); the adapter explains a failure from the journal instead: which service answered, its
 * status and error codes, or which transport failure happened. Only codes are kept, never a
 * body, a header or a URL.
 */

/** Entra ID (the token endpoint and its metadata) or the Key Vault data plane. */
export type AzureService = 'identity' | 'vault'

export interface Exchange {
  service: AzureService
  /** Absent when no answer came (see `failure`). */
  status?: number
  /** Whether the request carried a bearer token (a vault 401 without one is the challenge). */
  authorized: boolean
  /** OAuth `error` or Key Vault `error.code` of an error answer. */
  errorCode?: string
  /** Key Vault `error.innererror.code`, e.g. a refused key's reason. */
  innerErrorCode?: string
  /** Entra ID's AADSTS numbers (`error_codes`): 7000215 wrong secret, 700016 unknown app, 90002 unknown tenant. */
  aadstsCodes?: number[]
  failure?: OutboundError
}

export interface ExchangeJournal {
  last: Exchange | undefined
}

export interface TransportOptions {
  outbound: OutboundClient
  timeoutMs: number
  service: AzureService
  journal: ExchangeJournal
}

/** Key Vault answers are small JSON documents (a key bundle is a few KiB); this bounds a hostile one. */
const MAX_RESPONSE_BYTES = 1024 * 1024

const OUTBOUND_METHODS = new Set<OutboundRequest['method']>(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'])

/** Error codes are shown to the tenant: anything else a server puts there is dropped. */
const SAFE_CODE = /^[A-Za-z0-9_.-]{1,64}$/

export function createOutboundHttpClient(options: TransportOptions): HttpClient {
  return {
    async sendRequest(request: PipelineRequest): Promise<PipelineResponse> {
      const authorized = request.headers.has('authorization')
      try {
        const answer = await options.outbound.request(toOutboundRequest(request, options.timeoutMs))
        const bodyAsText = decode(answer.body, answer.headers['content-encoding']).toString('utf8')
        options.journal.last = {
          service: options.service,
          status: answer.status,
          authorized,
          ...(answer.status >= 400 ? errorCodes(bodyAsText) : {}),
        }
        return { request, status: answer.status, headers: toPipelineHeaders(answer.headers), bodyAsText }
      } catch (error) {
        if (error instanceof OutboundError) {
          options.journal.last = { service: options.service, authorized, failure: error }
        }
        throw error
      }
    },
  }
}

function toOutboundRequest(request: PipelineRequest, timeoutMs: number): OutboundRequest {
  const method = request.method as OutboundRequest['method']
  if (!OUTBOUND_METHODS.has(method)) throw new Error(`the transport does not send ${request.method}`)
  if (request.formData || request.multipartBody) {
    // The pipeline's form and multipart policies turn these into `body` before the transport;
    // neither Key Vault nor MSAL sends them.
    throw new Error('the transport sends only a serialised body')
  }
  const headers = request.headers.toJSON()
  // The outbound client sets Host from the URL and Node the length from the body it is given.
  delete headers['host']
  delete headers['content-length']
  // The pipeline asks for gzip, which its own transport would undo; this one asks for none.
  headers['accept-encoding'] = 'identity'
  const body = toBody(request.body)
  return {
    url: new URL(request.url),
    method,
    headers,
    ...(body === undefined ? {} : { body }),
    timeoutMs: request.timeout > 0 ? Math.min(request.timeout, timeoutMs) : timeoutMs,
    maxResponseBytes: MAX_RESPONSE_BYTES,
    oversize: 'fail',
    ...(request.abortSignal ? { signal: toAbortSignal(request.abortSignal) } : {}),
  }
}

/** What the SDKs here send: JSON text (Key Vault) or a form (MSAL); bytes are taken as they are. */
function toBody(body: PipelineRequest['body']): string | Buffer | undefined {
  if (body === undefined || body === null) return undefined
  if (typeof body === 'string') return body
  if (body instanceof ArrayBuffer) return Buffer.from(body)
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  // Streams, blobs and form data are never produced by these clients; refusing them keeps the
  // transport synchronous and its size known.
  throw new Error('the transport sends only a string or bytes as a body')
}

type SignalLike = NonNullable<PipelineRequest['abortSignal']>

function toAbortSignal(signal: SignalLike): AbortSignal {
  if (signal instanceof AbortSignal) return signal
  const controller = new AbortController()
  if (signal.aborted) controller.abort()
  else signal.addEventListener('abort', () => controller.abort(), { once: true })
  return controller.signal
}

/** A server that compresses anyway is decoded, within the same bound as the raw answer. */
function decode(body: Buffer, encoding: string | undefined): Buffer {
  const limits = { maxOutputLength: MAX_RESPONSE_BYTES }
  try {
    switch (encoding?.trim().toLowerCase()) {
      case undefined:
      case '':
      case 'identity':
        return body
      case 'gzip':
        return gunzipSync(body, limits)
      case 'deflate':
        return inflateSync(body, limits)
      case 'br':
        return brotliDecompressSync(body, limits)
    }
  } catch (error) {
    const tooLarge = (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE'
    throw new OutboundError(tooLarge ? 'response_too_large' : 'connection_failed')
  }
  // An encoding that was not asked for and is not known: the answer cannot be read.
  throw new OutboundError('connection_failed')
}

function toPipelineHeaders(headers: IncomingHttpHeaders): HttpHeaders {
  const flat: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value
  }
  return createHttpHeaders(flat)
}

/** The codes of an OAuth (`{error, error_codes}`) or Key Vault (`{error: {code, innererror}}`) error body. */
function errorCodes(text: string): Pick<Exchange, 'errorCode' | 'innerErrorCode' | 'aadstsCodes'> {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return {}
  }
  if (!isRecord(parsed)) return {}
  const { error } = parsed
  const codes: Pick<Exchange, 'errorCode' | 'innerErrorCode' | 'aadstsCodes'> = {}
  if (typeof error === 'string') {
    if (SAFE_CODE.test(error)) codes.errorCode = error
    const numbers = parsed['error_codes']
    if (Array.isArray(numbers)) {
      const safe = numbers.filter((n): n is number => Number.isSafeInteger(n)).slice(0, 5)
      if (safe.length > 0) codes.aadstsCodes = safe
    }
  } else if (isRecord(error)) {
    if (typeof error['code'] === 'string' && SAFE_CODE.test(error['code'])) codes.errorCode = error['code']
    const inner = error['innererror']
    if (isRecord(inner) && typeof inner['code'] === 'string' && SAFE_CODE.test(inner['code'])) {
      codes.innerErrorCode = inner['code']
    }
  }
  return codes
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
