import type { IncomingMessage } from 'node:http'

/** How much of a refused body is read, and for how long, before the connection is cut. */
export interface DrainBounds {
  maxBytes: number
  maxMs: number
}

const DEFAULT_DRAIN: DrainBounds = { maxBytes: 64 * 1024 * 1024, maxMs: 10_000 }

/**
 * Reads and discards, after the answer, the rest of a request body the service refused (413),
 * and keeps the connection open meanwhile. Fastify answers a body over the limit with
 * `Connection: close`, and Node closes the socket as soon as the answer is written; a client
 * still sending its body (one that did not wait for `100 Continue`) then has bytes in flight,
 * the close of a socket with unread data is a TCP reset, and the reset discards the answer on
 * the client's side before the client reads it: it sees a reset, never its 413. The caller
 * answers without `Connection: close`; once the declared body has arrived the connection is as
 * usable as after any answer. A client that keeps sending beyond the bounds is cut off (the
 * reset is then its own doing). A client that waits for the answer gets it at once.
 */
export function drainInBackground(request: IncomingMessage, bounds: DrainBounds = DEFAULT_DRAIN): void {
  if (request.complete || request.readableEnded || request.destroyed) return
  let read = 0
  const cleanup = () => {
    clearTimeout(timer)
    request.off('data', onData)
    request.off('end', cleanup)
    request.off('close', cleanup)
  }
  const cutOff = () => {
    cleanup()
    request.socket.destroy()
  }
  const onData = (chunk: Buffer) => {
    read += chunk.length
    if (read > bounds.maxBytes) cutOff()
  }
  const timer = setTimeout(cutOff, bounds.maxMs)
  timer.unref()
  request.on('data', onData)
  request.once('end', cleanup)
  request.once('close', cleanup)
  request.resume()
}
