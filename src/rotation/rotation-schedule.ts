import { DAY_MS } from '../platform/clock.ts'

/** Spec 2.3: a policy's frequency and the interval between its rotations. */
export const FREQUENCIES = ['Daily', 'Weekly', 'Monthly', 'Quarterly', 'Yearly'] as const
export type Frequency = (typeof FREQUENCIES)[number]

export const INTERVAL_MS: Record<Frequency, number> = {
  Daily: DAY_MS,
  Weekly: 7 * DAY_MS,
  Monthly: 30 * DAY_MS,
  Quarterly: 90 * DAY_MS,
  Yearly: 365 * DAY_MS,
}

/**
 * The rotation after one that was due at `due` and ran at `now`: one interval after the due
 * time, so a sweep's delay does not drift the schedule. Rotations missed while nothing ran
 * (every worker down for longer than an interval) are not replayed as a burst of versions: the
 * schedule restarts one interval after the rotation that did run.
 */
export function nextRotation(due: Date, now: Date, frequency: Frequency): Date {
  const interval = INTERVAL_MS[frequency]
  const next = due.getTime() + interval
  return new Date(next > now.getTime() ? next : now.getTime() + interval)
}
