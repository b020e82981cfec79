import type { IncomingMessage } from 'node:http'

/** How much of a refused body is read, and for how long, before the answer goes out anyway. */
export interface DrainBounds {
  maxBytes: number
  maxMs: number
}

export const DEFAULT_DRAIN: DrainBounds = { maxBytes: 64 * 1024 * 1024, maxMs: 10_000 }

/**
 * Reads and discards the rest of a request body the service refuses (413), up to a bound,
 * before the answer is sent. Fastify answers a body over the limit with `Connection: close`
 * while the client may still be sending it (one that did not wait for `100 Continue`); closing
 * a socket with unread data makes the kernel send a TCP reset, and the reset discards the
 * answer on the client's side before the client reads it. Once the declared body is read there
 * is nothing unread, and the close is a clean one. Resolves when the body ended, the bound was
 * reached or the request failed; never rejects.
 */
export function drainRequest(request: IncomingMessage, bounds: DrainBounds = DEFAULT_DRAIN): Promise<void> {
  if (request.complete || request.readableEnded || request.destroyed) return Promise.resolve()
  return new Promise((resolve) => {
    let read = 0
    const finish = () => {
      clearTimeout(timer)
      request.off('data', onData)
      request.off('end', finish)
      request.off('error', finish)
      request.off('close', finish)
      resolve()
    }
    const onData = (chunk: Buffer) => {
      read += chunk.length
      if (read > bounds.maxBytes) finish()
    }
    const timer = setTimeout(finish, bounds.maxMs)
    request.on('data', onData)
    request.once('end', finish)
    request.once('error', finish)
    request.once('close', finish)
    request.resume()
  })
}
