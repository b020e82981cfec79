/**
 * A bounded window of frame jobs: up to `size` run at once (WebCrypto works on several frames
 * in parallel, one at a time it is slow) and their results leave in the order the jobs came in.
 * `add` waits while the window is full, which is the stream's backpressure.
 */
export class OrderedWindow<T> {
  private readonly jobs: Promise<T>[] = []
  private readonly size: number

  constructor(size: number) {
    this.size = size
  }

  async add(job: Promise<T>, release: (value: T) => void): Promise<void> {
    // Awaited in order below: a job failing before its turn must not count as an unhandled rejection.
    job.catch(() => {})
    this.jobs.push(job)
    while (this.jobs.length >= this.size) release(await this.jobs.shift()!)
  }

  async drain(release: (value: T) => void): Promise<void> {
    while (this.jobs.length > 0) release(await this.jobs.shift()!)
  }
}

const DEFAULT_FRAMES_IN_FLIGHT = 16

export function framesInFlightOf(value: number | undefined): number {
  if (value === undefined) return DEFAULT_FRAMES_IN_FLIGHT
  if (!Number.isInteger(value) || value < 1 || value > 256)
    throw new TypeError(`framesInFlight must be an integer from 1 to 256 (is ${value})`)
  return value
}

/** Output bytes gathered before they are enqueued as one chunk: fewer, larger chunks cost the streams downstream far less. */
const BATCH_BYTES = 256 * 1024

/** Collects released frames and enqueues them as one chunk per transform call (or per 256 KiB). */
export class OutputBatch {
  private parts: Uint8Array[] = []
  private bytes = 0
  private readonly controller: TransformStreamDefaultController<Uint8Array>

  constructor(controller: TransformStreamDefaultController<Uint8Array>) {
    this.controller = controller
  }

  readonly add = (part: Uint8Array): void => {
    this.parts.push(part)
    this.bytes += part.length
    if (this.bytes >= BATCH_BYTES) this.flush()
  }

  flush(): void {
    if (this.parts.length === 0) return
    const out = this.parts.length === 1 ? this.parts[0]! : new Uint8Array(this.bytes)
    if (this.parts.length > 1) {
      let offset = 0
      for (const part of this.parts) {
        out.set(part, offset)
        offset += part.length
      }
    }
    this.parts = []
    this.bytes = 0
    this.controller.enqueue(out)
  }
}
