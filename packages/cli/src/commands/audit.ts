import { setTimeout as sleep } from 'node:timers/promises'
import { type components, dataOf, KmsError } from '@kms/sdk'
import {
  type CommandContext,
  type CommandNode,
  EXIT,
  integerFlag,
  parseCommandArgs,
  usageError,
} from '../command.ts'
import { fieldOf } from '../output.ts'
import { dateFlag, printList, str } from './shared.ts'

/** `kms audit list|tail`: the tenant's audit records (GET /api/v1/audit, newest first). */

type AuditRecord = components['schemas']['AuditRecord']
type Outcome = AuditRecord['outcome']

const OUTCOMES: readonly Outcome[] = ['success', 'failure', 'denied']
const COLUMNS = ['occurredAt', 'outcome', 'actor', 'action', 'resource', 'keyVersion']

const FILTER_FLAGS = {
  action: { type: 'string' },
  resource: { type: 'string' },
  outcome: { type: 'string', choices: OUTCOMES },
} as const
const FILTER_HELP = `  --action A       exact action, e.g. keys.rotate, apikeys.revoke
  --resource R     exact resource, e.g. key:<id>, apikey:<id>
  --outcome O      ${OUTCOMES.join(', ')}`

function filterOf(values: Record<string, unknown>) {
  return {
    action: str(values['action']),
    resource: str(values['resource']),
    outcome: str(values['outcome']) as Outcome | undefined,
  }
}

const list: CommandNode = {
  name: 'list',
  summary: 'List audit records, newest first',
  help: `Usage: kms audit list [--action A] [--resource R] [--outcome O] [--from ISO] [--to ISO]
                      [--limit N] [--cursor C]

${FILTER_HELP}
  --from, --to     records at or after --from, before --to (ISO 8601)
  --limit N        1 to 500 (default 100); --cursor continues after a page (its nextCursor)

Example:
  kms audit list --action keys.rotate --from 2026-01-01T00:00:00Z`,
  async run(args, ctx) {
    const { values } = parseCommandArgs(
      args,
      {
        ...FILTER_FLAGS,
        from: { type: 'string' },
        to: { type: 'string' },
        limit: { type: 'string' },
        cursor: { type: 'string' },
      },
      { min: 0, max: 0, names: 'no arguments' },
    )
    const cursor = str(values['cursor'])
    if (cursor !== undefined && !/^\d{1,18}$/.test(cursor))
      throw usageError('--cursor must be a nextCursor (digits)')
    const query = {
      ...filterOf(values),
      from: dateFlag(values['from'], 'from'),
      to: dateFlag(values['to'], 'to'),
      limit: integerFlag(values['limit'], 'limit', 1, 500) ?? 100,
      cursor,
    }
    const client = await ctx.client()
    const page = await dataOf(client.api.GET('/api/v1/audit', { params: { query } }))
    return printList(
      ctx,
      page,
      page.data,
      COLUMNS,
      page.nextCursor ? `--cursor ${page.nextCursor}` : undefined,
    )
  },
}

/** Records committed this long after their id's neighbours are still caught by tail. */
const LATE_WINDOW_MS = 10_000

/** One line per record: NDJSON for json/raw, a fixed-width line for table, the field for --field. */
function recordLine(ctx: CommandContext, record: AuditRecord): string {
  const { field, output } = ctx.settings
  if (field !== undefined) {
    const value = fieldOf(record, field)
    return typeof value === 'string' ? value : JSON.stringify(value)
  }
  if (output !== 'table') return JSON.stringify(record)
  return [
    record.occurredAt.padEnd(24),
    record.outcome.padEnd(7),
    record.actor.padEnd(44),
    record.action.padEnd(24),
    record.resource ?? '-',
  ].join(' ')
}

const byId = (a: AuditRecord, b: AuditRecord) =>
  BigInt(a.id) < BigInt(b.id) ? -1 : BigInt(a.id) > BigInt(b.id) ? 1 : 0

const tail: CommandNode = {
  name: 'tail',
  summary: 'Follow new audit records as they happen (until Ctrl-C)',
  help: `Usage: kms audit tail [--action A] [--resource R] [--outcome O] [--lines N] [--interval SECONDS]

Prints the last --lines records (default 10), then each new record once, oldest first, polling
every --interval seconds (default 2) until interrupted (Ctrl-C: exit 0). json and raw print one
JSON object per line.
${FILTER_HELP}

Example:
  kms audit tail --outcome denied`,
  async run(args, ctx) {
    const { values } = parseCommandArgs(
      args,
      { ...FILTER_FLAGS, lines: { type: 'string' }, interval: { type: 'string' } },
      { min: 0, max: 0, names: 'no arguments' },
    )
    const lines = integerFlag(values['lines'], 'lines', 0, 500) ?? 10
    const intervalText = str(values['interval']) ?? '2'
    const intervalSeconds = Number(intervalText)
    if (!/^\d+(\.\d+)?$/.test(intervalText) || intervalSeconds < 0.1 || intervalSeconds > 3600)
      throw usageError(`--interval must be a number of seconds from 0.1 to 3600 (got "${intervalText}")`)
    const filter = filterOf(values)
    const client = await ctx.client()
    const stop = new AbortController()
    const interrupted = () => stop.abort()
    process.once('SIGINT', interrupted)
    process.once('SIGTERM', interrupted)

    /** Every record matching the filter since `from` (all pages), or the newest `limit` without it. */
    async function fetchRecords(from: string | undefined, limit: number): Promise<AuditRecord[]> {
      const records: AuditRecord[] = []
      let cursor: string | undefined
      do {
        const page = await dataOf(
          client.api.GET('/api/v1/audit', {
            params: { query: { ...filter, from, limit, cursor } },
            signal: stop.signal,
          }),
        )
        records.push(...page.data)
        cursor = from === undefined ? undefined : (page.nextCursor ?? undefined)
      } while (cursor !== undefined)
      return records
    }

    // Records already printed (or older than the start) by id, with their time to forget them later.
    const seen = new Map<string, number>()
    let latest: number | undefined
    const remember = (records: AuditRecord[]) => {
      for (const r of records) {
        const at = Date.parse(r.occurredAt)
        seen.set(r.id, at)
        if (latest === undefined || at > latest) latest = at
      }
    }
    const windowStart = () =>
      latest === undefined ? undefined : new Date(latest - LATE_WINDOW_MS).toISOString()
    const print = (records: AuditRecord[]) => {
      for (const r of records.sort(byId)) ctx.io.stdout.write(`${recordLine(ctx, r)}\n`)
    }

    try {
      const first = await fetchRecords(undefined, Math.max(lines, 1))
      remember(first)
      // What happened just before the start counts as old too: only what comes later is printed.
      // (Printed once this is known, so a first line means every later record will be a new one.)
      if (latest !== undefined) remember(await fetchRecords(windowStart(), 500))
      print(first.slice(0, lines))
      while (!stop.signal.aborted) {
        await sleep(intervalSeconds * 1000, undefined, { signal: stop.signal })
        const records = await fetchRecords(windowStart(), 500)
        const fresh = records.filter((r) => !seen.has(r.id))
        print(fresh)
        remember(fresh)
        const forgetBefore = (latest ?? 0) - 2 * LATE_WINDOW_MS
        for (const [id, at] of seen) if (at < forgetBefore) seen.delete(id)
      }
    } catch (error) {
      const isStop =
        stop.signal.aborted &&
        ((error instanceof Error && error.name === 'AbortError') ||
          (error instanceof KmsError && error.code === 'aborted'))
      if (!isStop) throw error
    } finally {
      process.off('SIGINT', interrupted)
      process.off('SIGTERM', interrupted)
    }
    return EXIT.ok
  },
}

export const auditCommand: CommandNode = {
  name: 'audit',
  summary: "Read the tenant's audit records",
  help: 'Usage: kms audit <command> [flags]',
  children: [list, tail],
}
