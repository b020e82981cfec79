import { keepPreviousData, useQuery } from '@tanstack/react-query'
import { getRouteApi, Link, useNavigate } from '@tanstack/react-router'
import { useEffect, useState } from 'react'
import { Button as AriaButton } from 'react-aria-components'
import { api, must, type Schemas } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import type { KeysSearch } from '../../search.ts'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { SelectInput, TextInput } from '../../ui/Field.tsx'
import { Empty, Loading, PageHeader } from '../../ui/Page.tsx'
import { Pagination } from '../../ui/Pagination.tsx'
import { ExpiryText, LabelsField, LabelTags, StateBadge } from './keys-fields.tsx'
import {
  ALL_ALGORITHMS,
  algorithmsOf,
  formatDate,
  isKeyType,
  KEY_STATES,
  KEY_TYPES,
  type ListFilters,
  type ListQuery,
  listFilters,
} from './keys-model.ts'

const route = getRouteApi('/keys')
const PAGE_SIZE = 20
const ALL = 'all'

type Column = ListFilters['sort']
const COLUMNS: ReadonlyArray<{ id: Column | undefined; label: string }> = [
  { id: 'name', label: 'Name' },
  { id: 'purpose', label: 'Type' },
  { id: 'algorithm', label: 'Algorithm' },
  { id: 'status', label: 'Status' },
  { id: 'version', label: 'Version' },
  { id: undefined, label: 'Labels' },
  { id: undefined, label: 'Expires' },
  { id: 'createdAt', label: 'Created' },
]

const queryOf = (filters: ListFilters): ListQuery => ({
  sort: filters.sort,
  order: filters.order,
  limit: PAGE_SIZE,
  ...(filters.search ? { search: filters.search } : {}),
  ...(filters.keyType ? { keyType: [filters.keyType] } : {}),
  ...(filters.algorithm ? { algorithm: [filters.algorithm] } : {}),
  ...(filters.status ? { status: [filters.status] } : {}),
  ...(filters.labels.length > 0 ? { label: filters.labels } : {}),
})

/**
 * The cursor that starts page `page` (the API pages by cursor; the URL by number). Cursors of
 * pages already seen are remembered; a page opened directly is reached in steps of up to 1,000
 * keys. undefined: the list ends before that page.
 */
const cursors = new Map<string, string | null>()
const cursorKey = (filters: ListFilters, page: number) => JSON.stringify([filters, page])

async function cursorOf(filters: ListFilters, page: number): Promise<string | null | undefined> {
  if (page <= 1) return null
  const known = cursors.get(cursorKey(filters, page))
  if (known !== undefined) return known
  let cursor: string | null = null
  let remaining = (page - 1) * PAGE_SIZE
  while (remaining > 0) {
    const limit = Math.min(1000, remaining)
    const skipped: Schemas['KeyList'] = must(
      await api.GET('/api/v1/keys', {
        params: { query: { ...queryOf(filters), limit, ...(cursor ? { cursor } : {}) } },
      }),
    )
    cursor = skipped.nextCursor
    remaining -= limit
    if (!cursor) return undefined
  }
  cursors.set(cursorKey(filters, page), cursor)
  return cursor
}

async function fetchPage(filters: ListFilters, page: number): Promise<Schemas['KeyList'] | null> {
  const cursor = await cursorOf(filters, page)
  if (cursor === undefined) return null
  const list = must(
    await api.GET('/api/v1/keys', {
      params: { query: { ...queryOf(filters), ...(cursor ? { cursor } : {}) } },
    }),
  )
  cursors.set(cursorKey(filters, page + 1), list.nextCursor)
  return list
}

/** /keys: every key of the tenant, favourites first, with filters, sort and page in the URL. */
export function KeysPage() {
  const search = route.useSearch()
  const navigate = useNavigate({ from: '/keys' })
  const { can } = useWorkspace()
  const filters = listFilters(search)
  const page = search.page ?? 1
  const list = useQuery({
    queryKey: ['keys', 'list', filters, page],
    queryFn: () => fetchPage(filters, page),
    placeholderData: keepPreviousData,
  })

  /** A new filter starts again at page 1. */
  const filter = (change: Partial<KeysSearch>) =>
    navigate({ search: (prev) => ({ ...prev, ...change, page: undefined }) })

  const [text, setText] = useState(search.q ?? '')
  useEffect(() => setText(search.q ?? ''), [search.q])
  useEffect(() => {
    const q = text.trim() || undefined
    if (q === search.q) return
    const timer = setTimeout(() => void filter({ q }), 350)
    return () => clearTimeout(timer)
  })

  const filtered =
    filters.search !== undefined ||
    filters.keyType !== undefined ||
    filters.algorithm !== undefined ||
    filters.status !== undefined ||
    filters.labels.length > 0
  const denied = can('keys:write') ? undefined : needsScope('keys:write')
  const data = list.data
  const sortBy = (column: Column) => {
    const order =
      filters.sort === column
        ? filters.order === 'asc'
          ? 'desc'
          : 'asc'
        : column === 'createdAt' || column === 'version'
          ? 'desc'
          : 'asc'
    void filter({ sort: `${column}:${order}` })
  }

  return (
    <div className="keys-page">
      <PageHeader
        title="Keys"
        description="Encryption, signing and HMAC keys of this tenant. Favourites come first."
        actions={
          <>
            <Button variant="primary" disabledReason={denied} onPress={() => navigate({ to: '/keys/new' })}>
              Create key
            </Button>
            <Button disabledReason={denied} onPress={() => navigate({ to: '/keys/import' })}>
              Import key
            </Button>
          </>
        }
      />
      {data?.alert && (
        <Notice tone="warning">
          <strong>Keys expire soon: </strong>
          {data.alert.message}. They are marked in the Expires column; rotate them or set a later expiry
          before they stop encrypting and signing.
        </Notice>
      )}
      <search className="filters keys-filters" aria-label="Filter keys">
        <TextInput
          label="Search"
          type="search"
          value={text}
          onChange={setText}
          description="Name or description"
          className="keys-search"
        />
        <SelectInput
          label="Type"
          value={filters.keyType ?? ALL}
          options={[{ id: ALL, label: 'All types' }, ...KEY_TYPES]}
          onChange={(value) => {
            const keyType = isKeyType(value) ? value : undefined
            const keepAlgorithm = filters.algorithm && algorithmsOf(keyType).includes(filters.algorithm)
            void filter({ type: keyType, ...(keepAlgorithm ? {} : { algorithm: undefined }) })
          }}
        />
        <SelectInput
          label="Algorithm"
          value={filters.algorithm ?? ALL}
          options={[
            { id: ALL, label: 'All algorithms' },
            ...(filters.keyType ? algorithmsOf(filters.keyType) : ALL_ALGORITHMS).map((name) => ({
              id: name,
              label: name,
            })),
          ]}
          onChange={(value) => void filter({ algorithm: value === ALL ? undefined : value })}
        />
        <SelectInput
          label="Status"
          value={filters.status ?? ALL}
          options={[
            { id: ALL, label: 'All statuses' },
            ...KEY_STATES.map((state) => ({ id: state, label: state })),
          ]}
          onChange={(value) => void filter({ status: value === ALL ? undefined : value })}
        />
        <LabelsField
          label="Labels"
          addLabel="Add filter"
          description="Keys with any of these labels"
          value={filters.labels}
          onChange={(labels) => void filter({ labels: labels.length > 0 ? labels : undefined })}
        />
        {filtered && (
          <Button
            variant="quiet"
            onPress={() => {
              setText('')
              void navigate({ search: (prev) => ({ sort: prev.sort }) })
            }}
          >
            Clear filters
          </Button>
        )}
      </search>
      <ErrorAlert error={list.error} title="The keys could not be listed" />
      {list.isPending ? (
        <Loading what="keys" />
      ) : data === null ? (
        <Empty>
          There is no page {page} of this list.{' '}
          <Link to="/keys" search={(prev) => ({ ...prev, page: undefined })}>
            Go to the first page
          </Link>
        </Empty>
      ) : data && data.data.length === 0 ? (
        filtered ? (
          <Empty>No key matches these filters. Change or clear them to see more.</Empty>
        ) : (
          <Empty>
            This tenant has no keys yet.{' '}
            {denied
              ? 'Ask a developer or an admin to create one.'
              : 'Create or import one to start encrypting and signing.'}
          </Empty>
        )
      ) : data ? (
        <>
          <table className="table keys-table" aria-busy={list.isFetching}>
            <caption>
              {data.totalIsExact ? data.total : `More than ${data.total.toLocaleString()}`}{' '}
              {data.total === 1 ? 'key' : 'keys'}
              {filtered ? ' match the filters' : ''}
              {' · '}
              sorted by {COLUMNS.find((column) => column.id === filters.sort)?.label.toLowerCase()} (
              {filters.order === 'asc' ? 'ascending' : 'descending'}), favourites first
            </caption>
            <thead>
              <tr>
                {COLUMNS.map((column) => (
                  <th
                    key={column.label}
                    scope="col"
                    aria-sort={
                      column.id && column.id === filters.sort
                        ? filters.order === 'asc'
                          ? 'ascending'
                          : 'descending'
                        : undefined
                    }
                  >
                    {column.id ? (
                      <AriaButton className="keys-sort" onPress={() => column.id && sortBy(column.id)}>
                        {column.label}
                        <span aria-hidden="true" className="keys-sort-mark">
                          {column.id === filters.sort ? (filters.order === 'asc' ? ' ▲' : ' ▼') : ' ↕'}
                        </span>
                      </AriaButton>
                    ) : (
                      column.label
                    )}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {data.data.map((key) => (
                <tr key={key.id}>
                  <td>
                    {key.isFavorite && (
                      <span className="keys-star" title="Favourite">
                        <span aria-hidden="true">★ </span>
                        <span className="visually-hidden">Favourite: </span>
                      </span>
                    )}
                    <Link to="/keys/$keyId" params={{ keyId: key.id }} className="keys-name">
                      {key.name}
                    </Link>
                    {key.isDefault && <span className="badge badge-accent keys-inline-badge">Default</span>}
                    {key.description && <div className="muted keys-description">{key.description}</div>}
                  </td>
                  <td>{key.keyType}</td>
                  <td>
                    <span className="mono">{key.algorithm}</span>
                    {key.isPostQuantum && (
                      <abbr className="badge keys-inline-badge" title="Post-quantum">
                        PQ
                      </abbr>
                    )}
                  </td>
                  <td>
                    <StateBadge state={key.state} />
                  </td>
                  <td>v{key.version}</td>
                  <td>
                    {key.labels.length > 0 ? (
                      <LabelTags label={`Labels of ${key.name}`} labels={key.labels} />
                    ) : (
                      <span className="muted">None</span>
                    )}
                  </td>
                  <td>
                    <ExpiryText keyRecord={key} />
                  </td>
                  <td>{formatDate(key.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <Pagination
            page={page}
            pageSize={PAGE_SIZE}
            shown={data.data.length}
            total={data.totalIsExact ? data.total : undefined}
            hasMore={data.nextCursor !== null}
            onPage={(next) =>
              void navigate({ search: (prev) => ({ ...prev, page: next > 1 ? next : undefined }) })
            }
          />
        </>
      ) : null}
    </div>
  )
}
