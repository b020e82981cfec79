import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import { rootCertificates } from 'node:tls'
import { type AllowList, mergeAllowLists } from './allow-list.ts'
import {
  type CheckedDestination,
  checkDestination,
  DestinationRefused,
  DestinationUnresolved,
  type Resolver,
  systemResolver,
} from './destination.ts'

/**
 * The one way this service makes an HTTP request to somewhere else (webhooks, entropy sources,
 * and every later integration). Each request:
 * - resolves the host itself and refuses addresses that are not public unicast unless the
 *   operator allowed them (destination.ts, KMS_OUTBOUND_ALLOW);
 * - connects to exactly the checked address (a `lookup` that answers only it, TLS still
 *   verifying the host name), so a DNS answer that changes between check and connect
 *   (rebinding) changes nothing; no connection is pooled or reused;
 * - never follows a redirect: a 3xx is returned as it is, for the caller to refuse;
 * - has a connect timeout and a deadline for the whole exchange, body included;
 * - reads at most `maxResponseBytes` of the answer.
 */
export interface OutboundClient {
  request(request: OutboundRequest): Promise<OutboundResponse>
  /** Resolves and checks a URL without calling it (validation when a URL is saved). */
  check(url: URL): Promise<CheckedDestination>
  /** A client that also allows these hosts (the operator-configured entropy sources). */
  withAllowed(extra: AllowList): OutboundClient
  /**
   * A client that trusts this CA (PEM) besides Node's bundle: an integration whose endpoint has
   * a private CA (a tenant's cloud connection with `caCertificate`; tests' local servers).
   */
  withExtraCa(pem: string): OutboundClient
}

export interface OutboundRequest {
  url: URL
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD'
  headers: Record<string, string>
  body?: string | Buffer
  /** The whole exchange: resolution, connection, request, answer and body. */
  timeoutMs: number
  /** Bytes of the answer read at most. */
  maxResponseBytes: number
  /** `truncate`: keep the first maxResponseBytes; `fail`: an OutboundError response_too_large. */
  oversize: 'truncate' | 'fail'
  signal?: AbortSignal
}

export interface OutboundResponse {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
  truncated: boolean
  /** The operator allowed the destination: only then may its answer be shown or stored. */
  operatorAllowed: boolean
}

export type OutboundErrorCode =
  | 'destination_not_allowed'
  | 'destination_unresolved'
  | 'timeout'
  | 'aborted'
  | 'connection_failed'
  | 'response_too_large'

/** A request that got no usable answer. The message never holds the URL, headers or body. */
export class OutboundError extends Error {
  readonly code: OutboundErrorCode
  /** For destination_not_allowed: why, e.g. "localhost resolves to 127.0.0.1, a loopback address". */
  readonly reason: string | undefined
  constructor(code: OutboundErrorCode, reason?: string) {
    super(reason ? `${code}: ${reason}` : code)
    this.code = code
    this.reason = reason
  }
}

export interface OutboundClientOptions {
  allow: AllowList
  /** Injected by tests; dns.lookup otherwise. */
  resolve?: Resolver
  /** Time to establish the TCP connection (within the request's own timeout). */
  connectTimeoutMs?: number
  /**
   * Certificate authorities trusted instead of Node's bundle (an integration whose servers use a
   * private CA; tests). Certificates are always verified, against the URL's host name.
   */
  ca?: string | Buffer | Array<string | Buffer>
}

const DEFAULT_CONNECT_TIMEOUT_MS = 5000
const CHECK_TIMEOUT_MS = 5000

export function createOutboundClient(options: OutboundClientOptions): OutboundClient {
  const resolve = options.resolve ?? systemResolver
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS

  // Validation runs inside an API request: a resolver that does not answer in time counts as a
  // passing DNS failure (the delivery checks again), not as a request that hangs.
  const check = (url: URL) =>
    raceAbort(
      checkDestination(url, options.allow, resolve, 'validate'),
      AbortSignal.timeout(CHECK_TIMEOUT_MS),
    ).catch((error: unknown) => {
      if (error instanceof DestinationRefused || error instanceof DestinationUnresolved) throw error
      throw new DestinationUnresolved(url.hostname, false)
    })

  async function request(input: OutboundRequest): Promise<OutboundResponse> {
    const deadline = AbortSignal.timeout(input.timeoutMs)
    const signal = input.signal ? AbortSignal.any([input.signal, deadline]) : deadline
    const failure = () => new OutboundError(deadline.aborted ? 'timeout' : 'aborted')
    let destination: CheckedDestination
    try {
      destination = await raceAbort(checkDestination(input.url, options.allow, resolve), signal)
    } catch (error) {
      if (error instanceof DestinationRefused)
        throw new OutboundError('destination_not_allowed', error.reason)
      if (error instanceof DestinationUnresolved) throw new OutboundError('destination_unresolved')
      throw failure()
    }
    return send(input, destination, signal, failure)
  }

  function send(
    input: OutboundRequest,
    destination: CheckedDestination,
    signal: AbortSignal,
    failure: () => OutboundError,
  ): Promise<OutboundResponse> {
    const { url } = destination
    const address = destination.address!
    const family = address.version
    // Belt and braces: the socket connects to the checked address given as the host, so no
    // lookup happens; were one made, it could only answer that address.
    const pinned: LookupFunction = (_host, lookupOptions, callback) => {
      if ((lookupOptions as { all?: boolean }).all) callback(null, [{ address: address.text, family }])
      else callback(null, address.text, family)
    }
    const transport = url.protocol === 'https:' ? https : http
    return new Promise<OutboundResponse>((resolvePromise, reject) => {
      let settled = false
      const finish = (error: OutboundError | null, response?: OutboundResponse) => {
        if (settled) return
        settled = true
        clearTimeout(connectTimer)
        signal.removeEventListener('abort', onAbort)
        if (error) {
          req.destroy()
          reject(error)
        } else resolvePromise(response!)
      }
      const onAbort = () => finish(failure())
      const req = transport.request({
        protocol: url.protocol,
        hostname: address.text,
        port: url.port || (url.protocol === 'https:' ? 443 : 80),
        path: `${url.pathname}${url.search}`,
        method: input.method,
        // The Host header and the TLS server name (checked against the certificate) stay the
        // URL's host: only the socket is pinned.
        headers: { host: url.host, ...input.headers },
        ...(url.protocol === 'https:' && !isIpLiteral(url.hostname)
          ? { servername: url.hostname.replace(/\.$/, '') }
          : {}),
        ...(url.protocol === 'https:' && options.ca !== undefined ? { ca: options.ca } : {}),
        lookup: pinned,
        agent: false,
      })
      const connectTimer = setTimeout(() => finish(new OutboundError('timeout')), connectTimeoutMs)
      req.once('socket', (socket) => {
        if (!socket.connecting) clearTimeout(connectTimer)
        else socket.once('connect', () => clearTimeout(connectTimer))
      })
      req.once('error', () => finish(signal.aborted ? failure() : new OutboundError('connection_failed')))
      req.once('response', (response) => {
        readBody(response, input).then(
          ({ body, truncated }) =>
            finish(null, {
              status: response.statusCode ?? 0,
              headers: response.headers,
              body,
              truncated,
              operatorAllowed: destination.operatorAllowed,
            }),
          (error: unknown) =>
            finish(
              error instanceof OutboundError
                ? error
                : signal.aborted
                  ? failure()
                  : new OutboundError('connection_failed'),
            ),
        )
      })
      if (signal.aborted) return onAbort()
      signal.addEventListener('abort', onAbort, { once: true })
      req.end(input.body)
    })
  }

  return {
    request,
    check,
    withAllowed: (extra) =>
      createOutboundClient({ ...options, allow: mergeAllowLists(options.allow, extra) }),
    withExtraCa: (pem) =>
      createOutboundClient({
        ...options,
        ca: [...(options.ca === undefined ? rootCertificates : [options.ca].flat().map(String)), pem],
      }),
  }
}

const isIpLiteral = (host: string) => host.startsWith('[') || /^\d+\.\d+\.\d+\.\d+$/.test(host)

/** Reads the body up to the cap; a declared length over the cap fails before any of it is read. */
function readBody(
  response: IncomingMessage,
  input: Pick<OutboundRequest, 'maxResponseBytes' | 'oversize'>,
): Promise<{ body: Buffer; truncated: boolean }> {
  return new Promise((resolve, reject) => {
    const max = input.maxResponseBytes
    const chunks: Buffer[] = []
    let length = 0
    let done = false
    const succeed = (truncated: boolean) => {
      if (done) return
      done = true
      resolve({ body: Buffer.concat(chunks, length), truncated })
    }
    const fail = (error: OutboundError) => {
      if (done) return
      done = true
      for (const c of chunks) c.fill(0)
      reject(error)
    }
    const declared = Number(response.headers['content-length'] ?? Number.NaN)
    if (input.oversize === 'fail' && declared > max) {
      fail(new OutboundError('response_too_large'))
      response.destroy()
      return
    }
    response.on('data', (chunk: Buffer) => {
      if (done) return
      if (length + chunk.length <= max) {
        chunks.push(chunk)
        length += chunk.length
        return
      }
      if (input.oversize === 'fail') fail(new OutboundError('response_too_large'))
      else {
        chunks.push(chunk.subarray(0, max - length))
        length = max
        succeed(true)
      }
      // The rest is not wanted: the connection is not reused, so it is simply closed.
      response.destroy()
    })
    response.once('end', () => succeed(false))
    response.once('error', () => fail(new OutboundError('connection_failed')))
    response.once('aborted', () => fail(new OutboundError('connection_failed')))
  })
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(error)
      },
    )
  })
}
