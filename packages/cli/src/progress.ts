import type { Writable } from 'node:stream'

/**
 * A progress line on stderr for long file operations: bytes done (of the total when it is known),
 * percent and throughput, redrawn in place at most a few times a second.
 */

/** Below this a file is done before a bar would be worth looking at. */
const PROGRESS_MIN_BYTES = 8 * 1024 * 1024

/** Redraws at most this often: a terminal write per chunk would cost more than the crypto. */
const REDRAW_INTERVAL_MS = 200

export interface ProgressOptions {
  /** What is being done: `encrypting report.pdf`. */
  label: string
  /** The input's size in bytes, when known (a file; not a pipe). */
  total: number | undefined
  /** The terminal (stderr). */
  stream: Writable
  /** Milliseconds, for the throughput; replaceable so that the rendering can be checked exactly. */
  now?: () => number
}

export interface ProgressMeter {
  /** Counts bytes done; redraws when the last drawing is old enough. */
  add(bytes: number): void
  /** Draws the last state and ends the line; call it once the operation ended (either way). */
  finish(): void
}

const MB = 1_000_000

function formatBytes(bytes: number): string {
  if (bytes >= 1000 * MB) return `${(bytes / (1000 * MB)).toFixed(2)} GB`
  return `${(bytes / MB).toFixed(1)} MB`
}

/** One status line: `encrypting big.iso  512.0 MB / 1.07 GB  47%  210.3 MB/s`. */
function progressLine(label: string, done: number, total: number | undefined, elapsedMs: number): string {
  const rate = elapsedMs > 0 ? done / MB / (elapsedMs / 1000) : 0
  const percent = total === undefined ? '' : `  ${total === 0 ? 100 : Math.floor((done / total) * 100)}%`
  const amount =
    total === undefined ? formatBytes(done) : `${formatBytes(done)} / ${formatBytes(total)}${percent}`
  return `${label}  ${amount}  ${rate.toFixed(1)} MB/s`
}

export function progressMeter(options: ProgressOptions): ProgressMeter {
  const now = options.now ?? (() => performance.now())
  const started = now()
  let done = 0
  let lastDraw = Number.NEGATIVE_INFINITY
  let finished = false
  // \r returns to the line's start, ESC[K erases what a longer previous line left.
  const draw = () => {
    options.stream.write(`\r${progressLine(options.label, done, options.total, now() - started)}\x1b[K`)
  }
  return {
    add(bytes) {
      done += bytes
      const t = now()
      if (t - lastDraw >= REDRAW_INTERVAL_MS) {
        lastDraw = t
        draw()
      }
    },
    finish() {
      if (finished) return
      finished = true
      draw()
      options.stream.write('\n')
    },
  }
}

/**
 * Whether to show a bar: only on a terminal, not with --quiet, and only for a large input (or
 * one of unknown size, a pipe, that is not the terminal itself being typed into).
 */
export function wantsProgress(input: {
  interactive: boolean
  quiet: boolean
  size: number | undefined
  inputIsTerminal: boolean
}): boolean {
  if (!input.interactive || input.quiet || input.inputIsTerminal) return false
  return input.size === undefined || input.size >= PROGRESS_MIN_BYTES
}
