import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { getRouteApi, Link, useNavigate } from '@tanstack/react-router'
import { useEffect, useState } from 'react'
import { api, must } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { DialogButton } from '../../ui/Dialog.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { TextInput } from '../../ui/Field.tsx'
import { Empty, Loading, PageHeader } from '../../ui/Page.tsx'
import { Pagination } from '../../ui/Pagination.tsx'
import { CreateFolderForm, CreateSecretForm } from './forms.tsx'
import { type Folder, folderName, formatTime, type Secret, TOP_LEVEL, useFolders } from './shared.tsx'

const route = getRouteApi('/secrets')
const PAGE_SIZE = 20

type Done = { kind: 'created' | 'restored'; secret: Secret } | { kind: 'purged' | 'folder'; name: string }

export function SecretsPage() {
  const search = route.useSearch()
  const navigate = useNavigate({ from: '/secrets' })
  const { can } = useWorkspace()
  const writeReason = can('secrets:write') ? undefined : needsScope('secrets:write')
  const folders = useFolders()
  const [done, setDone] = useState<Done | undefined>()
  const page = search.page ?? 1
  const trash = search.trash === true
  const folder = search.folder
  const currentFolder =
    folder && folder !== TOP_LEVEL ? folders.data?.find((item) => item.id === folder) : undefined
  const where =
    folder === undefined
      ? 'All folders'
      : folder === TOP_LEVEL
        ? 'Top level'
        : (currentFolder?.path ?? 'Folder')

  const list = useQuery({
    queryKey: ['secrets', 'list', { folder, q: search.q, trash, page }],
    placeholderData: keepPreviousData,
    queryFn: async () =>
      must(
        await api.GET('/api/v1/secrets', {
          params: {
            query: {
              // The metadata projection: never a value, never notes.
              include: 'metadata',
              ...(folder !== undefined ? { folderId: folder } : {}),
              ...(search.q !== undefined ? { search: search.q } : {}),
              deleted: trash,
              limit: PAGE_SIZE,
              offset: (page - 1) * PAGE_SIZE,
            },
          },
        }),
      ),
  })

  return (
    <>
      <PageHeader
        title="Secrets"
        description="Passwords, tokens and connection strings, sealed at rest. Values are read only when you reveal or copy one, and each read is audited."
        actions={
          <>
            <DialogButton label="New folder" title="New folder" disabledReason={writeReason}>
              {(close) => (
                <CreateFolderForm
                  parentId={currentFolder?.id}
                  onCancel={close}
                  onCreated={(created) => {
                    close()
                    setDone({ kind: 'folder', name: created.path })
                    void navigate({ search: (prev) => ({ ...prev, folder: created.id, page: undefined }) })
                  }}
                />
              )}
            </DialogButton>
            <DialogButton
              label="New secret"
              title="New secret"
              variant="primary"
              disabledReason={writeReason}
            >
              {(close) => (
                <CreateSecretForm
                  folderId={currentFolder?.id ?? (folder === TOP_LEVEL ? TOP_LEVEL : undefined)}
                  onCancel={close}
                  onCreated={(created) => {
                    close()
                    setDone({ kind: 'created', secret: created })
                    // Show the folder it went into, on the live list.
                    void navigate({
                      search: (prev) => ({
                        ...prev,
                        trash: undefined,
                        page: undefined,
                        folder: folder === undefined ? undefined : (created.folderId ?? TOP_LEVEL),
                      }),
                    })
                  }}
                />
              )}
            </DialogButton>
          </>
        }
      />
      {done && <DoneNotice done={done} />}
      <div className="secrets-layout">
        <FolderNav folders={folders.data} current={folder} error={folders.error} trash={trash} />
        <div className="secrets-main">
          <nav aria-label="Secrets or trash" className="tabs">
            <Link
              className="tab"
              to="/secrets"
              search={(prev) => ({ ...prev, trash: undefined, page: undefined })}
              activeOptions={{ exact: true, includeSearch: true }}
              aria-current={trash ? undefined : 'page'}
              data-selected={trash ? undefined : true}
            >
              Secrets
            </Link>
            <Link
              className="tab"
              to="/secrets"
              search={(prev) => ({ ...prev, trash: true, page: undefined })}
              activeOptions={{ exact: true, includeSearch: true }}
              aria-current={trash ? 'page' : undefined}
              data-selected={trash ? true : undefined}
            >
              Trash
            </Link>
          </nav>
          <SearchForm
            q={search.q}
            onSearch={(q) => navigate({ search: (prev) => ({ ...prev, q, page: undefined }) })}
          />
          {trash && (
            <p className="muted">
              Deleted secrets can be restored for 30 days; then they are purged with every version.
            </p>
          )}
          {list.isPending ? (
            <Loading what="secrets" />
          ) : list.error ? (
            <ErrorAlert error={list.error} title="The secrets could not be listed" />
          ) : list.data.data.length === 0 && page > 1 ? (
            <Empty>
              Nothing on page {page}: the list has {list.data.total} in all.{' '}
              <Link to="/secrets" search={(prev) => ({ ...prev, page: undefined })}>
                Go to the first page
              </Link>
            </Empty>
          ) : list.data.data.length === 0 ? (
            <Empty>
              {search.q !== undefined
                ? `No ${trash ? 'deleted ' : ''}secret matches “${search.q}” in ${where}.`
                : trash
                  ? `The trash is empty${folder !== undefined ? ` in ${where}` : ''}.`
                  : folder === undefined
                    ? 'No secrets yet. Create one with “New secret”.'
                    : `No secrets in ${where} yet.`}
            </Empty>
          ) : (
            <>
              {trash ? (
                <TrashTable
                  secrets={list.data.data}
                  folders={folders.data}
                  where={where}
                  writeReason={writeReason}
                  onDone={setDone}
                />
              ) : (
                <SecretsTable secrets={list.data.data} folders={folders.data} where={where} />
              )}
              <Pagination
                page={page}
                pageSize={PAGE_SIZE}
                shown={list.data.data.length}
                total={list.data.total}
                onPage={(next) =>
                  navigate({ search: (prev) => ({ ...prev, page: next > 1 ? next : undefined }) })
                }
              />
            </>
          )}
        </div>
      </div>
    </>
  )
}

function DoneNotice(props: { done: Done }) {
  const { done } = props
  if (!('secret' in done))
    return (
      <Notice tone="success">
        {done.kind === 'folder'
          ? `Folder ${done.name} created.`
          : `${done.name} was deleted for good, with every version.`}
      </Notice>
    )
  return (
    <Notice tone="success">
      Secret{' '}
      <Link to="/secrets/$secretId" params={{ secretId: done.secret.id }}>
        {done.secret.name}
      </Link>{' '}
      {done.kind === 'created' ? 'created (version 1).' : 'restored.'}
    </Notice>
  )
}

/** The folders as links (the folder is in the URL): every secret, the top level, each folder. */
function FolderNav(props: {
  folders: Folder[] | undefined
  current: string | undefined
  error: unknown
  trash: boolean
}) {
  const items: Array<{ id: string | undefined; label: string }> = [
    { id: undefined, label: 'All folders' },
    { id: TOP_LEVEL, label: 'Top level' },
    ...(props.folders ?? []).map((folder) => ({ id: folder.id, label: folder.path })),
  ]
  return (
    <nav aria-label="Folders" className="secrets-folders">
      <h2 className="secrets-folders-heading">Folders</h2>
      <ul>
        {items.map((item) => (
          <li key={item.id ?? 'all'}>
            <Link
              to="/secrets"
              search={(prev) => ({ ...prev, folder: item.id, page: undefined })}
              className="secrets-folder-link"
              // Current by the URL's folder and trash, not by TanStack's partial match of the search.
              activeOptions={{ exact: true, includeSearch: true }}
              aria-current={props.current === item.id ? 'page' : undefined}
            >
              {item.label}
            </Link>
          </li>
        ))}
      </ul>
      <ErrorAlert error={props.error} title="The folders could not be listed" />
    </nav>
  )
}

/** The search text, sent when the person presses Enter or Search (an empty one clears it). */
function SearchForm(props: { q: string | undefined; onSearch(q: string | undefined): void }) {
  const [text, setText] = useState(props.q ?? '')
  useEffect(() => setText(props.q ?? ''), [props.q])
  return (
    <search>
      <form
        className="filters"
        onSubmit={(event) => {
          event.preventDefault()
          props.onSearch(text.trim() === '' ? undefined : text.trim())
        }}
      >
        <TextInput
          label="Search"
          type="search"
          description="In names and descriptions (never in values)."
          value={text}
          onChange={setText}
        />
        <div className="secrets-search-actions">
          <Button type="submit">Search</Button>
          {props.q !== undefined && (
            <Button
              variant="quiet"
              onPress={() => {
                setText('')
                props.onSearch(undefined)
              }}
            >
              Clear
            </Button>
          )}
        </div>
      </form>
    </search>
  )
}

function Labels(props: { labels: string[] | undefined }) {
  if (!props.labels || props.labels.length === 0) return <span className="muted">—</span>
  return (
    <span className="secrets-labels">
      {props.labels.map((label) => (
        <span key={label} className="badge">
          {label}
        </span>
      ))}
    </span>
  )
}

function SecretsTable(props: { secrets: Secret[]; folders: Folder[] | undefined; where: string }) {
  return (
    <table className="table" aria-label={`Secrets: ${props.where}`}>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Folder</th>
          <th scope="col">Labels</th>
          <th scope="col">Version</th>
          <th scope="col">Updated</th>
        </tr>
      </thead>
      <tbody>
        {props.secrets.map((secret) => (
          <tr key={secret.id}>
            <td>
              <Link to="/secrets/$secretId" params={{ secretId: secret.id }}>
                {secret.name}
              </Link>
              {secret.isActive === false && (
                <span className="badge badge-warning secrets-badge">Inactive</span>
              )}
              {secret.description && <div className="muted secrets-description">{secret.description}</div>}
            </td>
            <td>{folderName(props.folders, secret.folderId)}</td>
            <td>
              <Labels labels={secret.labels} />
            </td>
            <td>{secret.version}</td>
            <td>{formatTime(secret.updatedAt)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

function TrashTable(props: {
  secrets: Secret[]
  folders: Folder[] | undefined
  where: string
  writeReason: string | undefined
  onDone(done: Done): void
}) {
  const queryClient = useQueryClient()
  const restore = useMutation({
    mutationFn: async (id: string) =>
      must(await api.POST('/api/v1/secrets/{id}/restore', { params: { path: { id } } })),
    onSuccess: async (secret) => {
      await queryClient.invalidateQueries({ queryKey: ['secrets'] })
      props.onDone({ kind: 'restored', secret })
    },
  })
  return (
    <>
      <ErrorAlert error={restore.error} title="The secret was not restored" />
      <table className="table" aria-label={`Deleted secrets: ${props.where}`}>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Folder</th>
            <th scope="col">Deleted</th>
            <th scope="col">Purged on</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {props.secrets.map((secret) => (
            <tr key={secret.id}>
              <td>{secret.name}</td>
              <td>{folderName(props.folders, secret.folderId)}</td>
              <td>{formatTime(secret.deletedAt)}</td>
              <td>{formatTime(secret.purgeAt)}</td>
              <td>
                <div className="row secrets-row-actions">
                  <Button
                    aria-label={`Restore ${secret.name}`}
                    disabledReason={props.writeReason}
                    isDisabled={restore.isPending}
                    onPress={() => restore.mutate(secret.id)}
                  >
                    Restore
                  </Button>
                  <PurgeButton secret={secret} writeReason={props.writeReason} onDone={props.onDone} />
                </div>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  )
}

function PurgeButton(props: { secret: Secret; writeReason: string | undefined; onDone(done: Done): void }) {
  const queryClient = useQueryClient()
  const purge = useMutation({
    mutationFn: async () =>
      must(
        await api.DELETE('/api/v1/secrets/{id}', {
          params: { path: { id: props.secret.id }, query: { permanent: true } },
        }),
      ),
    onSuccess: async () => {
      await queryClient.invalidateQueries({ queryKey: ['secrets', 'list'] })
      props.onDone({ kind: 'purged', name: props.secret.name })
    },
  })
  return (
    <DialogButton
      label="Delete forever"
      title={`Delete ${props.secret.name} for good?`}
      variant="danger"
      disabledReason={props.writeReason}
    >
      {(close) => (
        <div className="stack">
          <p>
            <strong>{props.secret.name}</strong> and every version of its value are erased now. This cannot be
            undone.
          </p>
          <ErrorAlert error={purge.error} title="The secret was not deleted" />
          <EquivalentRequest method="DELETE" path={`/api/v1/secrets/${props.secret.id}?permanent=true`} />
          <div className="row">
            <Button
              variant="danger"
              isDisabled={purge.isPending}
              onPress={() => purge.mutate(undefined, { onSuccess: close })}
            >
              Delete forever
            </Button>
            <Button variant="quiet" onPress={close}>
              Cancel
            </Button>
          </div>
        </div>
      )}
    </DialogButton>
  )
}
