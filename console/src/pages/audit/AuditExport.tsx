import { useEffect, useRef, useState } from 'react'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import {
  type ActorNames,
  type AuditFilters,
  EXPORT_LIMIT,
  EXPORT_SCAN_LIMIT,
  type ExportResult,
  exportRecords,
  formatTime,
  jsonLines,
} from './audit-data.ts'

type ExportState =
  | { kind: 'idle' }
  | { kind: 'running'; count: number }
  | { kind: 'done'; file: string; result: ExportResult }
  | { kind: 'cancelled' }
  | { kind: 'failed'; error: unknown }

/** Hands the text to the browser as a file download (never through the URL bar). */
function download(text: string, file: string) {
  const url = URL.createObjectURL(new Blob([text], { type: 'application/x-ndjson' }))
  const link = document.createElement('a')
  link.href = url
  link.download = file
  document.body.append(link)
  link.click()
  link.remove()
  // The download has its own reference by then; the object URL is only released later.
  setTimeout(() => URL.revokeObjectURL(url), 60_000)
}

const count = (value: number) => value.toLocaleString('en-US')

/**
 * Export of the filtered records as JSON lines. The API has no export route: the console pages
 * through GET /api/v1/audit (500 records a request) and keeps at most EXPORT_LIMIT records.
 */
export function useAuditExport(filters: AuditFilters, names: () => Promise<ActorNames>) {
  const [state, setState] = useState<ExportState>({ kind: 'idle' })
  const controller = useRef<AbortController | null>(null)
  useEffect(() => () => controller.current?.abort(), [])

  const start = async () => {
    controller.current?.abort()
    const abort = new AbortController()
    controller.current = abort
    setState({ kind: 'running', count: 0 })
    try {
      const result = await exportRecords(
        filters,
        filters.actor ? await names() : new Map(),
        abort.signal,
        (progress) => setState({ kind: 'running', count: progress }),
      )
      const file = `audit-${new Date().toISOString().slice(0, 10)}.jsonl`
      download(jsonLines(result.records), file)
      setState({ kind: 'done', file, result })
    } catch (error) {
      setState(abort.signal.aborted ? { kind: 'cancelled' } : { kind: 'failed', error })
    } finally {
      if (controller.current === abort) controller.current = null
    }
  }
  const cancel = () => controller.current?.abort()
  return { state, start, cancel, running: state.kind === 'running' }
}

export function ExportStatus(props: { state: ExportState; onCancel(): void }) {
  const { state } = props
  if (state.kind === 'idle') return null
  if (state.kind === 'failed') return <ErrorAlert error={state.error} title="The export failed" />
  if (state.kind === 'cancelled') return <Notice>The export was cancelled; nothing was downloaded.</Notice>
  if (state.kind === 'running')
    return (
      <div className="row audit-export-progress">
        <Notice>Exporting… {count(state.count)} records so far.</Notice>
        <Button variant="quiet" onPress={props.onCancel}>
          Cancel export
        </Button>
      </div>
    )
  const { records, stopped } = state.result
  const oldest = records.at(-1)
  return (
    <Notice tone={stopped ? 'warning' : 'success'}>
      Exported {count(records.length)} {records.length === 1 ? 'record' : 'records'} to{' '}
      <code>{state.file}</code> (JSON lines, newest first).
      {stopped === 'limit' && oldest && (
        <>
          {' '}
          The export stops at {count(EXPORT_LIMIT)} records: to export older ones, set “To” to{' '}
          {formatTime(oldest.occurredAt)}.
        </>
      )}
      {stopped === 'scan' && (
        <>
          {' '}
          The actor filter reads at most {count(EXPORT_SCAN_LIMIT)} records in one export: narrow the time
          range or the other filters to export older ones.
        </>
      )}
    </Notice>
  )
}
