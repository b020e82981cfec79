import { performance } from 'node:perf_hooks'

/**
 * Event-loop delay of this process, measured as the lateness of a timer due every
 * `resolutionMs` and handed, in seconds, to `observe` (a histogram: kms_eventloop_delay_seconds).
 *
 * node:perf_hooks' monitorEventLoopDelay in Node 24 did not show a loop held for 200 ms (its
 * maximum stayed at the resolution), so it cannot be trusted for this.
 */
export interface EventLoopMonitor {
  stop(): void
}

export function createEventLoopMonitor(
  observe: (seconds: number) => void,
  resolutionMs = 10,
): EventLoopMonitor {
  let due = performance.now() + resolutionMs
  const timer = setInterval(() => {
    const now = performance.now()
    observe(Math.max(0, now - due) / 1000)
    due = now + resolutionMs
  }, resolutionMs)
  timer.unref()
  return {
    stop() {
      clearInterval(timer)
    },
  }
}
