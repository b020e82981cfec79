import { readFileSync } from 'node:fs'

/**
 * CPU time per process from /proc (Linux): user + system time of all of a process's threads, so
 * a process's crypto pool threads count with it. Used to report the CPU each request costs the
 * API processes, PostgreSQL and the load generator, which a req/s figure on shared cores hides.
 */
const TICKS_PER_SECOND = 100 // USER_HZ, 100 on every Linux architecture Node runs on

/** Seconds of CPU the process has used, or undefined when it is gone. */
function cpuSecondsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name, which may itself hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND
  } catch {
    return undefined
  }
}

/**
 * The pids among `pids` whose command name (comm) is `name` and that run on this machine: a
 * PostgreSQL server elsewhere (or in another pid namespace) reports pids that are not its
 * processes here.
 */
export function pidsNamed(pids: Iterable<number>, name: string): number[] {
  const out: number[] = []
  for (const pid of pids) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === name) out.push(pid)
    } catch {
      // gone meanwhile, or not here
    }
  }
  return out
}

/** A group of processes' CPU seconds at one moment, to subtract from a later reading. */
export type CpuReading = Map<number, number>

export function readCpu(pids: Iterable<number>): CpuReading {
  const out: CpuReading = new Map()
  for (const pid of pids) {
    const seconds = cpuSecondsOf(pid)
    if (seconds !== undefined) out.set(pid, seconds)
  }
  return out
}

/** CPU seconds used between two readings (a process that started in between counts from zero). */
export function cpuBetween(before: CpuReading, after: CpuReading): number {
  let total = 0
  for (const [pid, seconds] of after) total += seconds - (before.get(pid) ?? 0)
  return total
}
