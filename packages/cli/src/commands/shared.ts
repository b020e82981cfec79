import type { CommandContext } from '../command.ts'
import { usageError } from '../command.ts'
import { type Answer, printAnswer } from '../output.ts'

/** What the commands share: printing a list with its columns, and the checks of common flag values. */

/** Prints a list answer; on a terminal, says on stderr how to get the next page. */
export function printList(
  ctx: CommandContext,
  value: unknown,
  items: readonly unknown[],
  columns: readonly string[],
  next?: string | undefined,
): number {
  const answer: Answer = { value, rows: { items, columns } }
  printAnswer(answer, ctx)
  if (next && ctx.settings.output === 'table' && ctx.settings.field === undefined)
    ctx.io.stderr.write(`more: add ${next}\n`)
  return 0
}

/** An ISO 8601 date-time flag (2026-01-31T00:00:00Z), checked before anything is sent. */
export function dateFlag(value: unknown, name: string): string | undefined {
  if (value === undefined) return undefined
  const text = String(value)
  if (!/^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?$/.test(text) || Number.isNaN(Date.parse(text)))
    throw usageError(`--${name} must be an ISO 8601 date-time such as 2030-01-31T00:00:00Z (got "${text}")`)
  return new Date(text).toISOString()
}

export const strings = (value: unknown): string[] | undefined =>
  Array.isArray(value) && value.length > 0 ? value.map(String) : undefined

export const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined)
