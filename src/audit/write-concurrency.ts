import { cpus } from 'node:os'
import { performance } from 'node:perf_hooks'

/**
 * How many group-commit writes the audit log may have in flight, chosen by how busy the machine
 * is. Each write costs a round trip and a commit, ~230 µs of CPU between this process (the
 * socket write that wakes the database) and PostgreSQL (the commit) whatever its size, on top of
 * ~25 µs per record. With CPU to spare, several small writes in flight cut the time an operation
 * waits for its record: with 8 connections, MACs ran at 2,100 req/s with one write in flight and
 * 2,700-3,400 with four. When the CPU is the limit, the extra commits are what the operations
 * pay for: with 32 connections one write in flight halved the commits per request (0.107 →
 * 0.062) and served 7,450-7,800 MACs/s against 6,800-7,000, encrypts 5,440 against 5,100, with
 * 10-35% less CPU per request in the API process and PostgreSQL (bench/RESULTS.md, optimisation
 * log). A machine at 70% of its CPU or more counts as saturated: that threshold chose four writes
 * at 8 connections and one at 32 in the same runs.
 *
 * The machine's CPU, not this process's event loop, is what tells the two apart: with ML-DSA
 * signatures the pool threads (and PostgreSQL) fill the cores while the event loop idles. It is
 * read (os.cpus(), ~50 µs) at most once per window, when a write is about to start, so an idle
 * service reads nothing.
 */
export interface WriteConcurrencyOptions {
  /** Writes in flight while the machine has CPU to spare. */
  idle: number
  /** Writes in flight while it is saturated. */
  busy: number
  /** Share of the machine's CPU time (0-1) in use at and above which it counts as saturated. */
  threshold: number
  windowMs: number
  /** The machine's CPU use since the previous call (0-1); injected by tests. */
  utilization?: () => number
  now?: () => number
}

export function loadAwareWriteConcurrency(options: WriteConcurrencyOptions): () => number {
  const now = options.now ?? (() => performance.now())
  const utilization = options.utilization ?? machineUtilization()
  let windowStart = now()
  let current = options.idle
  return () => {
    const at = now()
    if (at - windowStart >= options.windowMs) {
      current = utilization() >= options.threshold ? options.busy : options.idle
      windowStart = at
    }
    return current
  }
}

/** Share of all cores' time spent not idle since the previous call. */
export function machineUtilization(): () => number {
  const read = () => {
    let idle = 0
    let total = 0
    for (const { times } of cpus()) {
      idle += times.idle
      total += times.user + times.nice + times.sys + times.idle + times.irq
    }
    return { idle, total }
  }
  let last = read()
  return () => {
    const next = read()
    const total = next.total - last.total
    const idle = next.idle - last.idle
    last = next
    return total > 0 ? 1 - idle / total : 0
  }
}
