import { CliError, type CommandContext, EXIT } from './command.ts'

/**
 * How an answer is printed: `json` (the API's JSON, indented), `table` (aligned columns for a
 * list, FIELD/VALUE rows for one object, long cells cut), `raw` (the answer's bytes or string
 * exactly, e.g. decrypted plaintext; compact JSON for answers that have none), and `--field a.b`
 * (one field, a string without quotes) over any of them.
 */

export interface Answer {
  /** The answer as JSON shows it (byte fields in Base64, as the API has them). */
  value: unknown
  /** What `--output raw` writes: bytes or a string, exactly (no newline added to bytes). */
  raw?: Uint8Array | string
  /** For a list: the rows and the columns the table shows (the JSON keeps every field). */
  rows?: { items: readonly unknown[]; columns: readonly string[] }
  /** What `--output table` prints instead of the FIELD/VALUE rows (e.g. a secret's value, whole). */
  text?: string
  /** The FIELD/VALUE rows show whole values: a ciphertext or signature cut short is of no use. */
  whole?: boolean
}

/** Table cells longer than this are cut (the JSON output has them whole). */
const MAX_CELL = 48
const MAX_VALUE = 80

export function printAnswer(answer: Answer, ctx: CommandContext): void {
  const { settings, io } = ctx
  if (settings.field !== undefined) {
    const value = fieldOf(answer.value, settings.field)
    io.stdout.write(`${typeof value === 'string' ? value : JSON.stringify(value)}\n`)
    return
  }
  if (settings.output === 'raw') {
    if (answer.raw === undefined) io.stdout.write(`${JSON.stringify(answer.value)}\n`)
    else {
      io.stdout.write(answer.raw)
      // A shell prompt glued to the value is only a terminal's problem; a pipe gets the bytes exactly.
      if (io.stdoutIsTerminal && typeof answer.raw === 'string' && !answer.raw.endsWith('\n'))
        io.stdout.write('\n')
    }
    return
  }
  if (settings.output === 'table') {
    if (answer.text !== undefined)
      io.stdout.write(answer.text.endsWith('\n') ? answer.text : `${answer.text}\n`)
    else if (answer.rows) io.stdout.write(listTable(answer.rows.items, answer.rows.columns))
    else io.stdout.write(objectTable(answer.value, answer.whole ? Number.POSITIVE_INFINITY : MAX_VALUE))
    return
  }
  io.stdout.write(`${JSON.stringify(answer.value, null, 2)}\n`)
}

/** `a.b.0.c` of a value; a CliError (usage) naming the fields there are when there is no such field. */
export function fieldOf(value: unknown, path: string): unknown {
  let current = value
  const walked: string[] = []
  for (const part of path.split('.')) {
    const container = current
    if (Array.isArray(container) && /^\d+$/.test(part) && Number(part) < container.length)
      current = container[Number(part)]
    else if (isRecord(container) && Object.hasOwn(container, part)) current = container[part]
    else {
      const where = walked.length > 0 ? `"${walked.join('.')}"` : 'the answer'
      const there = Array.isArray(container)
        ? `${where} is a list of ${container.length} (indexes 0 to ${container.length - 1})`
        : isRecord(container)
          ? `fields of ${where}: ${Object.keys(container).join(', ')}`
          : `${where} is ${JSON.stringify(container)}`
      throw new CliError('usage', `--field ${path}: no "${part}" (${there})`, EXIT.usage)
    }
    walked.push(part)
  }
  return current
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

function cell(value: unknown, max: number): string {
  let text: string
  if (value === null || value === undefined) text = '-'
  else if (typeof value === 'string') text = value
  else if (Array.isArray(value) && value.every((v) => typeof v !== 'object')) text = value.join(',') || '-'
  else if (typeof value === 'object') text = JSON.stringify(value)
  else text = String(value)
  // One line per row: a PEM or a multi-line note shows its first line.
  const lines = text.split(/\r?\n/)
  text = lines[0]!.replace(/\t/g, ' ')
  if (lines.length > 1) text += ' …'
  const chars = [...text]
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : text
}

function aligned(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => [...row[i]!].length)))
  return rows
    .map((row) =>
      row
        .map((text, i) => (i === row.length - 1 ? text : text + ' '.repeat(widths[i]! - [...text].length)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
}

function listTable(items: readonly unknown[], columns: readonly string[]): string {
  const header = columns.map((c) => c.toUpperCase())
  const body = items.map((item) =>
    columns.map((c) => cell(isRecord(item) ? fieldAt(item, c) : item, MAX_CELL)),
  )
  if (body.length === 0) return `${aligned([header])}\n(none)\n`
  return `${aligned([header, ...body])}\n`
}

/** `details.name` in a row: a column may name a nested field. */
function fieldAt(record: Record<string, unknown>, path: string): unknown {
  let current: unknown = record
  for (const part of path.split('.')) current = isRecord(current) ? current[part] : undefined
  return current
}

function objectTable(value: unknown, max: number): string {
  if (!isRecord(value)) return `${cell(value, Number.POSITIVE_INFINITY)}\n`
  const rows = Object.entries(value).map(([key, v]) => [key, cell(v, max)])
  if (rows.length === 0) return '(empty)\n'
  return `${aligned(rows)}\n`
}
