import { createHistogram, performance } from 'node:perf_hooks'

export interface EventLoopDelay {
  /** Seconds. */
  p50: number
  p90: number
  p99: number
  max: number
}

/**
 * Event-loop delay of this process, as a window: each snapshot covers the time since the
 * previous one and starts a new window (the convention of Prometheus client libraries), so a
 * scrape shows the delay of the last interval rather than a lifetime average that hides spikes.
 *
 * Measured as the lateness of a timer due every `resolutionMs`: node:perf_hooks'
 * monitorEventLoopDelay in Node 24 did not show a loop held for 200 ms (its maximum stayed at
 * the resolution), so it cannot be trusted for this.
 */
export interface EventLoopMonitor {
  snapshotAndReset(): EventLoopDelay
  stop(): void
}

export function createEventLoopMonitor(resolutionMs = 10): EventLoopMonitor {
  const histogram = createHistogram()
  let due = performance.now() + resolutionMs
  const timer = setInterval(() => {
    const now = performance.now()
    // Nanoseconds; the histogram takes integers of at least 1.
    histogram.record(Math.max(1, Math.round((now - due) * 1e6)))
    due = now + resolutionMs
  }, resolutionMs)
  timer.unref()
  const seconds = (ns: number) => ns / 1e9
  return {
    snapshotAndReset() {
      const empty = histogram.count === 0
      const snapshot = {
        p50: empty ? 0 : seconds(histogram.percentile(50)),
        p90: empty ? 0 : seconds(histogram.percentile(90)),
        p99: empty ? 0 : seconds(histogram.percentile(99)),
        max: empty ? 0 : seconds(histogram.max),
      }
      histogram.reset()
      return snapshot
    },
    stop() {
      clearInterval(timer)
    },
  }
}
