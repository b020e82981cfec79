import { monitorEventLoopDelay } from 'node:perf_hooks'

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
 */
export interface EventLoopMonitor {
  snapshotAndReset(): EventLoopDelay
  stop(): void
}

export function createEventLoopMonitor(resolutionMs = 10): EventLoopMonitor {
  const histogram = monitorEventLoopDelay({ resolution: resolutionMs })
  histogram.enable()
  const seconds = (ns: number) => (Number.isFinite(ns) ? ns / 1e9 : 0)
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
      histogram.disable()
    },
  }
}
