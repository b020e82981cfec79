import { useInfiniteQuery, useQuery, useQueryClient } from '@tanstack/react-query'
import { getRouteApi } from '@tanstack/react-router'
import { useEffect } from 'react'
import { ApiError } from '../../api/client.ts'
import { needsScope, ROLE_NAMES, useWorkspace } from '../../auth/workspace.tsx'
import { defined } from '../../search.ts'
import { ErrorAlert } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { Empty, Loading, PageHeader } from '../../ui/Page.tsx'
import { Pagination } from '../../ui/Pagination.tsx'
import { AuditDetails, OutcomeBadge } from './AuditDetails.tsx'
import { ExportStatus, useAuditExport } from './AuditExport.tsx'
import { AuditFiltersForm } from './AuditFilters.tsx'
import {
  type ActorNames,
  type AuditFilters,
  type AuditRecord,
  EXPORT_LIMIT,
  filtersOf,
  formatTime,
  hasFilters,
  loadActorNames,
  PAGE_SCAN_LIMIT,
  PAGE_SIZE,
  readPage,
  retryable,
} from './audit-data.ts'

const route = getRouteApi('/audit')
const NO_NAMES: ActorNames = new Map()

/** The filtered records, page after page (each page's cursor leads to the next). */
function useAuditRecords(filters: AuditFilters, namesForFilter: () => Promise<ActorNames>) {
  return useInfiniteQuery({
    queryKey: ['audit', 'records', filters],
    queryFn: async ({ pageParam, signal }) =>
      readPage(filters, pageParam, filters.actor ? await namesForFilter() : NO_NAMES, signal),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => last.nextCursor ?? undefined,
    retry: retryable,
  })
}

/**
 * The audit log: every operation on the tenant, newest first, filtered by action, actor,
 * resource, outcome and time (all in the URL, with the page), each record's fields in a dialog,
 * and an export of the filtered records as JSON lines. Reading it needs audit:read.
 *
 * The API pages by cursor; the URL holds the page number, and the console reaches page N by
 * reading pages 1 to N in turn (kept in the query cache, so Next and Previous read nothing again).
 */
export function AuditPage() {
  const search = route.useSearch()
  const navigate = route.useNavigate()
  const { can } = useWorkspace()
  const queryClient = useQueryClient()
  const filters = filtersOf(search)
  const page = search.page ?? 1
  const readable = can('audit:read')

  const namesOptions = {
    queryKey: ['audit', 'actor-names', can('apikeys:read')],
    queryFn: () => loadActorNames(can('apikeys:read')),
    staleTime: 60_000,
  }
  const names = useQuery({ ...namesOptions, enabled: readable }).data ?? NO_NAMES
  const namesForFilter = () => queryClient.fetchQuery(namesOptions).catch(() => NO_NAMES)

  const records = useAuditRecords(filters, namesForFilter)
  const exporter = useAuditExport(filters, namesForFilter)

  // Page N of the URL: the pages before it are read first (each one's cursor leads to the next).
  const loaded = records.data?.pages.length ?? 0
  const { hasNextPage, isFetching, isFetchNextPageError, fetchNextPage } = records
  useEffect(() => {
    if (loaded > 0 && loaded < page && hasNextPage && !isFetching && !isFetchNextPageError)
      void fetchNextPage()
  }, [loaded, page, hasNextPage, isFetching, isFetchNextPageError, fetchNextPage])

  const apply = (next: AuditFilters) => navigate({ search: () => defined({ ...next, page: undefined }) })
  const toPage = (next: number) =>
    navigate({ search: (previous) => ({ ...previous, page: next > 1 ? next : undefined }) })

  const refused = records.error instanceof ApiError && records.error.status === 403
  const exportReason = !readable || refused ? needsScope('audit:read') : undefined

  return (
    <>
      <PageHeader
        title="Audit log"
        description="Every operation on this tenant, newest first: who did what, to which resource, and how it ended."
        actions={
          <>
            {!exportReason && (
              <Button onPress={() => void records.refetch()} isDisabled={records.isFetching}>
                Refresh
              </Button>
            )}
            <Button
              variant="primary"
              onPress={() => void exporter.start()}
              isDisabled={exporter.running}
              disabledReason={exportReason}
              aria-describedby={exportReason ? undefined : 'audit-export-help'}
            >
              Export JSON lines
            </Button>
          </>
        }
      />
      {!exportReason && (
        <p id="audit-export-help" className="muted audit-export-help">
          The export downloads the records matching the filters, one JSON object per line, at most{' '}
          {EXPORT_LIMIT.toLocaleString('en-US')} records.
        </p>
      )}
      <ExportStatus state={exporter.state} onCancel={exporter.cancel} />
      {refused ? (
        <NoAccess error={records.error} />
      ) : (
        <>
          {readable && <AuditFiltersForm filters={filters} onApply={apply} onClear={() => apply({})} />}
          <section className="audit-records" aria-labelledby="audit-records-title">
            <h2 id="audit-records-title">Records</h2>
            <Records
              query={records}
              page={page}
              filters={filters}
              names={names}
              onFilter={apply}
              onPage={toPage}
            />
          </section>
        </>
      )}
    </>
  )
}

function NoAccess(props: { error: unknown }) {
  const { role } = useWorkspace()
  return (
    <section className="section audit-no-access" aria-labelledby="audit-no-access">
      <h2 id="audit-no-access">You cannot read the audit log</h2>
      <ErrorAlert error={props.error} />
      <p>
        Reading the audit log needs the <code>audit:read</code> scope, which Owner and Admin members have
        {role ? <>; your role in this tenant is {ROLE_NAMES[role]}</> : null}. Ask an owner or an admin if you
        need to see who did what.
      </p>
    </section>
  )
}

function Records(props: {
  query: ReturnType<typeof useAuditRecords>
  page: number
  filters: AuditFilters
  names: ActorNames
  onFilter(filters: AuditFilters): void
  onPage(page: number): void
}) {
  const { query, page } = props
  const pages = query.data?.pages ?? []
  const current = pages[page - 1]
  if (query.isPending) return <Loading what="audit records" />
  if (!current) {
    if (query.isFetchNextPageError || query.isError)
      return (
        <>
          <ErrorAlert error={query.error} title="The records could not be read" />
          <Button onPress={() => void (pages.length > 0 ? query.fetchNextPage() : query.refetch())}>
            Try again
          </Button>
        </>
      )
    if (query.hasNextPage || query.isFetching) return <Loading what={`page ${page}`} />
    const last = Math.max(1, pages.length)
    return (
      <>
        <Empty>
          There is no page {page}: the records {hasFilters(props.filters) ? 'matching these filters ' : ''}end
          on page {last}.
        </Empty>
        <Button onPress={() => props.onPage(last)}>Go to page {last}</Button>
      </>
    )
  }
  const hasMore = pages.length > page || query.hasNextPage
  const first = (page - 1) * PAGE_SIZE + 1
  return (
    <>
      {query.isError && <ErrorAlert error={query.error} title="The records could not be refreshed" />}
      {current.scanLimited && (
        <p className="muted audit-note">
          The console read {current.scanned.toLocaleString('en-US')} records for this page without finding{' '}
          {PAGE_SIZE} by this actor (it stops at {PAGE_SCAN_LIMIT.toLocaleString('en-US')} a page). Next reads
          further back; a time range or an action narrows the search.
        </p>
      )}
      {current.records.length === 0 ? (
        <Empty>
          {page > 1
            ? 'No more records.'
            : hasFilters(props.filters)
              ? 'No records match these filters. Clear or change them to see more.'
              : 'No records yet. Every operation on this tenant (keys, cryptography, secrets, team changes) will be recorded here.'}
        </Empty>
      ) : (
        <>
          <p className="muted audit-range" aria-live="polite">
            Records {first}–{first + current.records.length - 1}
            {hasFilters(props.filters) ? ' matching the filters' : ''}, newest first.
          </p>
          <div className="audit-table-wrap">
            <table className="table audit-table">
              <caption className="visually-hidden">Audit records, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Action</th>
                  <th scope="col">Resource</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">
                    <span className="visually-hidden">Details</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {current.records.map((record) => (
                  <Row key={record.id} record={record} names={props.names} onFilter={props.onFilter} />
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      {(page > 1 || hasMore) && (
        <Pagination
          page={page}
          pageSize={PAGE_SIZE}
          shown={current.records.length}
          hasMore={hasMore}
          onPage={props.onPage}
        />
      )}
    </>
  )
}

function Row(props: { record: AuditRecord; names: ActorNames; onFilter(filters: AuditFilters): void }) {
  const { record } = props
  const name = props.names.get(record.actor)
  return (
    <tr>
      <td className="audit-time">
        <time dateTime={record.occurredAt}>{formatTime(record.occurredAt)}</time>
      </td>
      <td className="audit-actor">
        {name ? (
          <>
            <span>{name}</span>
            <span className="mono muted audit-raw">{record.actor}</span>
          </>
        ) : (
          <span className="mono">{record.actor}</span>
        )}
      </td>
      <td className="mono audit-action">{record.action}</td>
      <td className="mono audit-resource">{record.resource ?? <span className="muted">None</span>}</td>
      <td>
        <OutcomeBadge outcome={record.outcome} />
      </td>
      <td>
        <AuditDetails record={record} names={props.names} onFilter={props.onFilter} />
      </td>
    </tr>
  )
}
