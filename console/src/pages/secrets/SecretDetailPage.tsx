import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { getRouteApi, Link } from '@tanstack/react-router'
import { useState } from 'react'
import { ApiError, api, must, type Schemas } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { CopyButton } from '../../ui/CopyButton.tsx'
import { DialogButton } from '../../ui/Dialog.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { Empty, Loading, PageHeader } from '../../ui/Page.tsx'
import { EditSecretForm, NewVersionForm } from './forms.tsx'
import { folderName, formatTime, readValue, type Secret, TOP_LEVEL, useFolders } from './shared.tsx'

const route = getRouteApi('/secrets/$secretId')

type Version = Schemas['SecretVersion']

export function SecretDetailPage() {
  const { secretId } = route.useParams()
  const queryClient = useQueryClient()
  const { can } = useWorkspace()
  const writeReason = can('secrets:write') ? undefined : needsScope('secrets:write')
  const folders = useFolders()
  const [notice, setNotice] = useState<string | undefined>()
  const [trashed, setTrashed] = useState<Secret | undefined>()
  const secret = useQuery({
    queryKey: ['secrets', 'detail', secretId],
    enabled: trashed === undefined,
    // The metadata projection: the value is read only on Reveal or Copy.
    queryFn: async () =>
      must(
        await api.GET('/api/v1/secrets/{id}', {
          params: { path: { id: secretId }, query: { include: 'metadata' } },
        }),
      ),
  })
  const restore = useMutation({
    mutationFn: async () =>
      must(await api.POST('/api/v1/secrets/{id}/restore', { params: { path: { id: secretId } } })),
    onSuccess: async (restored) => {
      setTrashed(undefined)
      setNotice(`${restored.name} was restored.`)
      await queryClient.invalidateQueries({ queryKey: ['secrets'] })
    },
  })

  if (trashed) {
    return (
      <>
        <PageHeader title={trashed.name} description="In the trash" />
        <Notice tone="success">
          {trashed.name} was moved to the trash. It can be restored for 30 days, then it is purged with every
          version.
        </Notice>
        <ErrorAlert error={restore.error} title="The secret was not restored" />
        <div className="row">
          <Button variant="primary" isDisabled={restore.isPending} onPress={() => restore.mutate()}>
            Restore
          </Button>
          <Link to="/secrets" search={{ trash: true }}>
            Open the trash
          </Link>
          <Link to="/secrets" search={{ folder: trashed.folderId ?? TOP_LEVEL }}>
            Back to the folder
          </Link>
        </div>
      </>
    )
  }
  if (secret.isPending) {
    return (
      <>
        <PageHeader title="Secret" />
        <Loading what="the secret" />
      </>
    )
  }
  if (secret.error) {
    const missing = secret.error instanceof ApiError && secret.error.status === 404
    return (
      <>
        <PageHeader title="Secret" />
        <ErrorAlert error={secret.error} title="The secret could not be read" />
        {missing && (
          <p>
            A deleted secret is not shown here: look for it in the{' '}
            <Link to="/secrets" search={{ trash: true }}>
              trash
            </Link>
            , where it can be restored.
          </p>
        )}
      </>
    )
  }
  const data = secret.data
  const readReason =
    data.isActive === false
      ? 'The secret is inactive: its value cannot be read until it is active again'
      : undefined
  return (
    <>
      <p className="secrets-back">
        <Link to="/secrets" search={{ folder: data.folderId ?? TOP_LEVEL }}>
          ← {folderName(folders.data, data.folderId)}
        </Link>
      </p>
      <PageHeader
        title={data.name}
        description={
          data.description ||
          (data.folderId
            ? `A secret in ${folderName(folders.data, data.folderId)}`
            : 'A secret at the top level')
        }
        actions={
          <>
            <DialogButton label="Edit details" title={`Edit ${data.name}`} disabledReason={writeReason}>
              {(close) => (
                <EditSecretForm
                  secret={data}
                  onCancel={close}
                  onSaved={() => {
                    close()
                    setNotice('The details were saved.')
                  }}
                />
              )}
            </DialogButton>
            <TrashButton
              secret={data}
              writeReason={writeReason}
              onTrashed={(deleted) => {
                setNotice(undefined)
                setTrashed(deleted)
              }}
            />
          </>
        }
      />
      {notice && <Notice tone="success">{notice}</Notice>}
      {data.isActive === false && (
        <Notice tone="warning">
          This secret is inactive: its value cannot be read until it is active again.
        </Notice>
      )}

      <section className="section" aria-labelledby="secret-value-heading">
        <h2 id="secret-value-heading" className="secrets-heading">
          Value
        </h2>
        <ValueReveal key={data.version} secret={data} readReason={readReason} />
        {data.hasTotp && <TotpCode secretId={data.id} readReason={readReason} />}
      </section>

      <section className="section" aria-labelledby="secret-update-heading">
        <h2 id="secret-update-heading" className="secrets-heading">
          Update the value
        </h2>
        <NewVersionForm
          secret={data}
          disabledReason={writeReason}
          onSaved={(saved) => setNotice(`Saved: the value is now version ${saved.version}.`)}
        />
      </section>

      <section className="section" aria-labelledby="secret-details-heading">
        <h2 id="secret-details-heading" className="secrets-heading">
          Details
        </h2>
        <dl className="dl">
          <dt>Id</dt>
          <dd className="mono">{data.id}</dd>
          <dt>Folder</dt>
          <dd>{folderName(folders.data, data.folderId)}</dd>
          <dt>Labels</dt>
          <dd>{data.labels && data.labels.length > 0 ? data.labels.join(', ') : '—'}</dd>
          <dt>Current version</dt>
          <dd>{data.version}</dd>
          <dt>State</dt>
          <dd>
            {data.isActive === false ? (
              <span className="badge badge-warning">Inactive</span>
            ) : (
              <span className="badge badge-success">Active</span>
            )}
            {data.isFavorite && <span className="badge badge-accent secrets-badge">Favourite</span>}
          </dd>
          <dt>Expires</dt>
          <dd>{data.expiresAt ? formatTime(data.expiresAt) : 'Never'}</dd>
          <dt>Created</dt>
          <dd>
            {formatTime(data.createdAt)} by <span className="mono">{data.createdBy}</span>
          </dd>
          <dt>Updated</dt>
          <dd>
            {formatTime(data.updatedAt)} by <span className="mono">{data.updatedBy}</span>
          </dd>
        </dl>
      </section>

      <Versions secret={data} readReason={readReason} />
      <History secretId={data.id} />
    </>
  )
}

/**
 * The value, hidden until the person presses Reveal: nothing is fetched before. Hide forgets it;
 * Copy fetches it into the clipboard without showing it.
 */
function ValueReveal(props: { secret: Secret; readReason: string | undefined }) {
  const queryClient = useQueryClient()
  // Each read is audited: the history below shows it once the value was read.
  const recordRead = () =>
    queryClient.invalidateQueries({ queryKey: ['secrets', 'history', props.secret.id] })
  // gcTime 0: once hidden, the value is not kept in the mutation cache.
  const reveal = useMutation({
    mutationFn: () => readValue(props.secret.id),
    onSettled: recordRead,
    gcTime: 0,
  })
  const shown = reveal.data !== undefined
  return (
    <>
      {shown ? (
        <pre className="secrets-value">
          <code>{reveal.data}</code>
        </pre>
      ) : (
        <p className="secrets-hidden">
          <span aria-hidden="true">••••••••••••</span>
          <span className="visually-hidden">Hidden</span>
        </p>
      )}
      <div className="row">
        {shown ? (
          <Button onPress={() => reveal.reset()}>Hide</Button>
        ) : (
          <Button
            variant="secondary"
            disabledReason={props.readReason}
            isDisabled={reveal.isPending}
            onPress={() => reveal.mutate()}
          >
            {reveal.isPending ? 'Revealing…' : 'Reveal'}
          </Button>
        )}
        {props.readReason === undefined && (
          <CopyButton
            value={async () => {
              const value = await readValue(props.secret.id)
              void recordRead()
              return value
            }}
            label="Copy value"
          />
        )}
      </div>
      <ErrorAlert error={reveal.error} title="The value could not be read" />
      <p className="muted secrets-note">
        Version {props.secret.version}. Revealing or copying reads the value: each read is recorded in the
        audit log.
      </p>
      <EquivalentRequest method="GET" path={`/api/v1/secrets/${props.secret.id}?include=all`} />
    </>
  )
}

/** The current one-time code (RFC 6238), fetched when asked for: each code read is audited. */
function TotpCode(props: { secretId: string; readReason: string | undefined }) {
  const queryClient = useQueryClient()
  const code = useMutation({
    gcTime: 0,
    mutationFn: async () =>
      must(await api.GET('/api/v1/secrets/{id}/totp', { params: { path: { id: props.secretId } } })),
    // Each code read is audited: the history shows it.
    onSettled: () => queryClient.invalidateQueries({ queryKey: ['secrets', 'history', props.secretId] }),
  })
  return (
    <div className="secrets-totp">
      <h3>One-time code</h3>
      {code.data && (
        <p>
          <span className="mono secrets-totp-code">{code.data.code}</span>{' '}
          <span className="muted">
            valid until {new Date(code.data.validUntil).toLocaleTimeString()} ({code.data.digits} digits,{' '}
            {code.data.algorithm}, every {code.data.period} s)
          </span>
        </p>
      )}
      <div className="row">
        <Button disabledReason={props.readReason} isDisabled={code.isPending} onPress={() => code.mutate()}>
          {code.data ? 'New code' : 'Show code'}
        </Button>
        {code.data && (
          <Button variant="quiet" onPress={() => code.reset()}>
            Hide code
          </Button>
        )}
      </div>
      <ErrorAlert error={code.error} title="The code could not be read" />
      <EquivalentRequest method="GET" path={`/api/v1/secrets/${props.secretId}/totp`} />
    </div>
  )
}

function Versions(props: { secret: Secret; readReason: string | undefined }) {
  const versions = useQuery({
    queryKey: ['secrets', 'versions', props.secret.id, props.secret.version],
    queryFn: async () =>
      must(await api.GET('/api/v1/secrets/{id}/versions', { params: { path: { id: props.secret.id } } }))
        .data,
  })
  return (
    <section className="section" aria-labelledby="secret-versions-heading">
      <h2 id="secret-versions-heading" className="secrets-heading">
        Versions
      </h2>
      <p className="muted">
        Each new value is a version; the newest ones are kept, the current one included.
      </p>
      {versions.isPending ? (
        <Loading what="versions" />
      ) : versions.error ? (
        <ErrorAlert error={versions.error} title="The versions could not be listed" />
      ) : (
        <table className="table" aria-label="Versions of the value">
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">Set</th>
              <th scope="col">By</th>
              <th scope="col">Value</th>
            </tr>
          </thead>
          <tbody>
            {versions.data.map((version) => (
              <VersionRow
                key={version.version}
                secretId={props.secret.id}
                version={version}
                readReason={props.readReason}
              />
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}

function VersionRow(props: { secretId: string; version: Version; readReason: string | undefined }) {
  const { version } = props
  const queryClient = useQueryClient()
  const reveal = useMutation({
    gcTime: 0,
    onSettled: () => queryClient.invalidateQueries({ queryKey: ['secrets', 'history', props.secretId] }),
    mutationFn: async () =>
      must(
        await api.GET('/api/v1/secrets/{id}/versions/{version}', {
          params: { path: { id: props.secretId, version: version.version }, query: { include: 'all' } },
        }),
      ).value ?? '',
  })
  return (
    <tr>
      <td>
        {version.version}
        {version.isCurrent && <span className="badge badge-accent secrets-badge">Current</span>}
      </td>
      <td>{formatTime(version.createdAt)}</td>
      <td className="mono">{version.createdBy}</td>
      <td>
        {reveal.data !== undefined ? (
          <div className="stack secrets-version-value">
            <pre className="secrets-value">
              <code>{reveal.data}</code>
            </pre>
            <Button
              variant="quiet"
              aria-label={`Hide version ${version.version}`}
              onPress={() => reveal.reset()}
            >
              Hide
            </Button>
          </div>
        ) : (
          <Button
            variant="quiet"
            aria-label={`Reveal version ${version.version}`}
            disabledReason={props.readReason}
            isDisabled={reveal.isPending}
            onPress={() => reveal.mutate()}
          >
            Reveal
          </Button>
        )}
        <ErrorAlert error={reveal.error} />
      </td>
    </tr>
  )
}

const ACTION_NAMES: Record<string, string> = {
  'secrets.create': 'Created',
  'secrets.update': 'Changed',
  'secrets.delete': 'Moved to the trash',
  'secrets.restore': 'Restored',
  'secrets.move': 'Moved',
  'secrets.value.read': 'Value read',
}

/** The secret's audit records, newest first (needs audit:read). */
function History(props: { secretId: string }) {
  const { can } = useWorkspace()
  const allowed = can('audit:read')
  const history = useQuery({
    queryKey: ['secrets', 'history', props.secretId],
    enabled: allowed,
    queryFn: async () =>
      must(
        await api.GET('/api/v1/audit', {
          params: { query: { resource: `secret:${props.secretId}`, limit: 25 } },
        }),
      ).data,
  })
  return (
    <section className="section" aria-labelledby="secret-history-heading">
      <h2 id="secret-history-heading" className="secrets-heading">
        History
      </h2>
      {!allowed ? (
        <p className="muted">
          The history comes from the audit log: {needsScope('audit:read').toLowerCase()}.
        </p>
      ) : history.isPending ? (
        <Loading what="the history" />
      ) : history.error ? (
        <ErrorAlert error={history.error} title="The history could not be read" />
      ) : history.data.length === 0 ? (
        <Empty>Nothing recorded yet.</Empty>
      ) : (
        <table className="table" aria-label="History of the secret">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">What</th>
              <th scope="col">Who</th>
              <th scope="col">Outcome</th>
              <th scope="col">Details</th>
            </tr>
          </thead>
          <tbody>
            {history.data.map((record) => (
              <tr key={record.id}>
                <td>{formatTime(record.occurredAt)}</td>
                <td>
                  <span>{ACTION_NAMES[record.action] ?? record.action}</span>{' '}
                  <span className="muted mono secrets-action">{record.action}</span>
                </td>
                <td className="mono">{record.actor}</td>
                <td>
                  <span
                    className={`badge ${record.outcome === 'success' ? 'badge-success' : 'badge-danger'}`}
                  >
                    {record.outcome}
                  </span>
                </td>
                <td>{describe(record.details)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}

/** The non-secret details of a record (versions, fields changed or read), in a line. */
function describe(details: Record<string, unknown> | null): string {
  if (!details) return '—'
  const parts = Object.entries(details)
    .filter(([, value]) => value !== null && value !== undefined)
    .map(
      ([name, value]) =>
        `${name}: ${Array.isArray(value) ? value.join(', ') : typeof value === 'object' ? JSON.stringify(value) : String(value)}`,
    )
  return parts.length > 0 ? parts.join('; ') : '—'
}

function TrashButton(props: {
  secret: Secret
  writeReason: string | undefined
  onTrashed(secret: Secret): void
}) {
  const queryClient = useQueryClient()
  const trash = useMutation({
    mutationFn: async () =>
      must(
        await api.DELETE('/api/v1/secrets/{id}', {
          params: { path: { id: props.secret.id }, query: { permanent: false } },
        }),
      ),
    onSuccess: async (deleted) => {
      queryClient.removeQueries({ queryKey: ['secrets', 'detail', props.secret.id] })
      await queryClient.invalidateQueries({ queryKey: ['secrets', 'list'] })
      props.onTrashed(deleted ?? props.secret)
    },
  })
  return (
    <DialogButton
      label="Move to trash"
      title={`Move ${props.secret.name} to the trash?`}
      variant="danger"
      disabledReason={props.writeReason}
    >
      {(close) => (
        <div className="stack">
          <p>
            <strong>{props.secret.name}</strong> disappears from lists and reads. It can be restored from the
            trash for 30 days; then it is purged with every version.
          </p>
          <ErrorAlert error={trash.error} title="The secret was not moved to the trash" />
          <EquivalentRequest method="DELETE" path={`/api/v1/secrets/${props.secret.id}`} />
          <div className="row">
            <Button
              variant="danger"
              isDisabled={trash.isPending}
              onPress={() => trash.mutate(undefined, { onSuccess: close })}
            >
              Move to trash
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
