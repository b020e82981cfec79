import type { Clock } from '../../src/platform/clock.ts'

/** A clock that stands still until the test moves it. */
export interface ManualClock extends Clock {
  advance(ms: number): void
  set(date: Date): void
}

export function manualClock(start = new Date()): ManualClock {
  let current = start.getTime()
  return {
    now: () => new Date(current),
    advance(ms) {
      current += ms
    },
    set(date) {
      current = date.getTime()
    },
  }
}
