/**
 * The one source of "now" for time-driven behaviour (key expiry, scheduled deletion). Passed in
 * explicitly so tests can move time forward instead of waiting for it.
 */
export interface Clock {
  now(): Date
}

export const systemClock: Clock = { now: () => new Date() }

export const DAY_MS = 24 * 60 * 60 * 1000
