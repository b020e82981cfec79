import { useQuery, useQueryClient } from '@tanstack/react-query'
import { getRouteApi, useNavigate } from '@tanstack/react-router'
import { useEffect, useRef, useState } from 'react'
import { api, must, type Schemas } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { CopyButton } from '../../ui/CopyButton.tsx'
import { DialogButton } from '../../ui/Dialog.tsx'
import { TextInput } from '../../ui/Field.tsx'
import { Empty, Loading, PageHeader } from '../../ui/Page.tsx'
import { Pagination } from '../../ui/Pagination.tsx'
import { CreateApiKeyForm, type CreatedApiKey } from './CreateApiKeyForm.tsx'
import { ALL_SCOPES } from './scopes.ts'
import { ConfirmButton, Time } from './shared.tsx'

type ApiKey = Schemas['ApiKeyView']

const route = getRouteApi('/api-keys')
const PAGE_SIZE = 20
/** The list reads every key at once (names, prefixes and scopes are searched here), up to this. */
const FETCHED = 1000

const statusOf = (key: ApiKey): 'revoked' | 'expired' | 'active' =>
  key.revokedAt
    ? 'revoked'
    : key.expiresAt && new Date(key.expiresAt).getTime() <= Date.now()
      ? 'expired'
      : 'active'

const STATUS_BADGE = {
  active: <span className="badge badge-success">Active</span>,
  expired: <span className="badge badge-warning">Expired</span>,
  revoked: <span className="badge badge-danger">Revoked</span>,
}

/** The keys a revocation takes with it: those it created, directly or through others, not revoked yet. */
function descendantsOf(id: string, keys: readonly ApiKey[]): ApiKey[] {
  const found: ApiKey[] = []
  const queue = [id]
  while (queue.length > 0) {
    const parent = queue.shift()
    for (const key of keys)
      if (key.parentId === parent && !found.includes(key)) {
        found.push(key)
        queue.push(key.id)
      }
  }
  return found.filter((key) => !key.revokedAt)
}

export function ApiKeysPage() {
  const { can } = useWorkspace()
  const search = route.useSearch()
  const navigate = useNavigate({ from: '/api-keys' })
  const queryClient = useQueryClient()
  const [created, setCreated] = useState<CreatedApiKey | null>(null)
  const [revoked, setRevoked] = useState<{ name: string; with: string[] } | null>(null)
  const list = useQuery({
    queryKey: ['api-keys', 'list'],
    queryFn: async () =>
      must(
        await api.GET('/api/v1/api-keys', {
          params: { query: { limit: FETCHED, offset: 0, includeRevoked: true } },
        }),
      ),
    enabled: can('apikeys:read'),
  })
  const members = useQuery({
    queryKey: ['api-keys', 'members'],
    queryFn: async () => must(await api.GET('/api/v1/team/members')).data,
    staleTime: 60_000,
  })

  const keys = [...(list.data?.data ?? [])].reverse()
  const byId = new Map(keys.map((key) => [key.id, key]))
  const query = search.q?.toLowerCase()
  const matching = query
    ? keys.filter(
        (key) =>
          key.name.toLowerCase().includes(query) ||
          key.prefix.toLowerCase().includes(query) ||
          key.scopes.some((scope) => scope.includes(query)),
      )
    : keys
  const page = Math.min(search.page ?? 1, Math.max(1, Math.ceil(matching.length / PAGE_SIZE)))
  const shown = matching.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE)

  const creator = (actor: string) => {
    const [kind, id] = actor.split(':', 2)
    if (kind === 'member') {
      const member = members.data?.find((m) => m.accountId === id)
      return member ? (member.displayName ?? member.email) : 'A former member'
    }
    if (kind === 'apikey') {
      const key = id ? byId.get(id) : undefined
      return key ? `API key ${key.name}` : 'An API key'
    }
    return actor === 'cli' ? 'The operator (CLI)' : actor
  }

  const revoke = async (key: ApiKey) => {
    const answer = must(await api.POST('/api/v1/api-keys/{id}/revoke', { params: { path: { id: key.id } } }))
    setCreated(null)
    setRevoked({
      name: key.name,
      with: answer.revokedDescendants.map((id) => byId.get(id)?.name ?? id),
    })
    await queryClient.invalidateQueries({ queryKey: ['api-keys', 'list'] })
  }

  const cannotWrite = can('apikeys:write') ? undefined : needsScope('apikeys:write')

  return (
    <>
      <PageHeader
        title="API keys"
        description="Keys that programs use to call the API (X-Api-Key header), each with its own scopes."
        actions={
          <DialogButton
            label="Create API key"
            title="Create an API key"
            variant="primary"
            isDismissable={false}
            disabledReason={cannotWrite}
          >
            {(close) => (
              <CreateApiKeyForm
                close={close}
                onCreated={(key) => {
                  setRevoked(null)
                  setCreated(key)
                }}
              />
            )}
          </DialogButton>
        }
      />
      {created && <NewKeyPanel created={created} onDone={() => setCreated(null)} />}
      {revoked && (
        <Notice tone="success">
          Revoked “{revoked.name}”: programs using it are refused from now on.{' '}
          {revoked.with.length > 0
            ? `Also revoked, because it created them: ${revoked.with.join(', ')}.`
            : 'No key it created had to be revoked with it.'}
        </Notice>
      )}
      {can('apikeys:read') && cannotWrite && (
        <Notice>You can see the API keys but not create or revoke them. {cannotWrite}.</Notice>
      )}
      {!can('apikeys:read') ? (
        <Notice>{needsScope('apikeys:read')}: the list of API keys is not shown.</Notice>
      ) : (
        <section aria-labelledby="api-keys-list-title">
          <h2 id="api-keys-list-title" className="visually-hidden">
            The tenant’s API keys
          </h2>
          <search className="filters">
            <TextInput
              label="Search"
              type="search"
              description="Name, prefix or scope"
              value={search.q ?? ''}
              onChange={(q) =>
                void navigate({
                  search: (prev) => ({ ...prev, page: undefined, q: q || undefined }),
                  replace: true,
                })
              }
            />
          </search>
          {list.isPending ? (
            <Loading what="API keys" />
          ) : list.isError ? (
            <ErrorAlert error={list.error} title="The API keys could not be read" />
          ) : matching.length === 0 ? (
            <Empty>
              {query
                ? `No API key matches “${search.q}”.`
                : 'This tenant has no API keys yet. Create one for each program that calls the API.'}
            </Empty>
          ) : (
            <>
              {list.data.total > list.data.data.length && (
                <Notice tone="warning">
                  Showing the {list.data.data.length} oldest of {list.data.total} keys.
                </Notice>
              )}
              <table className="table api-keys-table">
                <caption className="visually-hidden">
                  API keys, newest first{query ? `, matching “${search.q}”` : ''}
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Scopes</th>
                    <th scope="col">Expires</th>
                    <th scope="col">Status</th>
                    <th scope="col">Created</th>
                    <th scope="col">Last used</th>
                    <th scope="col">Parent</th>
                    {!cannotWrite && (
                      <th scope="col">
                        <span className="visually-hidden">Actions</span>
                      </th>
                    )}
                  </tr>
                </thead>
                <tbody>
                  {shown.map((key) => {
                    const status = statusOf(key)
                    const parent = key.parentId ? byId.get(key.parentId) : undefined
                    const missing = key.scopes.filter((scope) => !can(scope))
                    const descendants = descendantsOf(key.id, keys)
                    return (
                      <tr key={key.id}>
                        <td>
                          <strong>{key.name}</strong>
                          <div className="mono muted">{key.prefix}…</div>
                        </td>
                        <td>
                          {ALL_SCOPES.every((scope) => key.scopes.includes(scope)) ? (
                            <span>Every scope ({key.scopes.length})</span>
                          ) : (
                            <ul className="api-keys-scope-list">
                              {key.scopes.map((scope) => (
                                <li key={scope}>
                                  <code>{scope}</code>
                                </li>
                              ))}
                            </ul>
                          )}
                          {key.keys && (
                            <div className="muted api-keys-small">
                              Only {key.keys.length === 1 ? '1 key' : `${key.keys.length} keys`}:{' '}
                              <span className="mono">{key.keys.slice(0, 3).join(', ')}</span>
                              {key.keys.length > 3 && ` and ${key.keys.length - 3} more`}
                            </div>
                          )}
                          {key.operations && (
                            <div className="muted api-keys-small">Only {key.operations.join(', ')}</div>
                          )}
                        </td>
                        <td>
                          <Time value={key.expiresAt} />
                        </td>
                        <td>
                          {STATUS_BADGE[status]}
                          {key.revokedAt && (
                            <div className="muted api-keys-small">
                              <Time value={key.revokedAt} />
                            </div>
                          )}
                        </td>
                        <td>
                          <Time value={key.createdAt} />
                          <div className="muted api-keys-small">by {creator(key.createdBy)}</div>
                        </td>
                        <td>
                          <Time value={key.lastUsedAt} />
                        </td>
                        <td>
                          {key.parentId === null ? (
                            <span className="muted">None</span>
                          ) : (
                            <span>{parent ? parent.name : <span className="mono">{key.parentId}</span>}</span>
                          )}
                        </td>
                        {!cannotWrite && (
                          <td>
                            {status !== 'revoked' && (
                              <ConfirmButton
                                label="Revoke"
                                accessibleLabel={`Revoke ${key.name}`}
                                title={`Revoke “${key.name}”?`}
                                confirmLabel="Revoke key"
                                disabledReason={
                                  missing.length > 0
                                    ? `The key holds scopes your role does not: ${missing.join(', ')}`
                                    : undefined
                                }
                                onConfirm={() => revoke(key)}
                              >
                                <p>
                                  Programs using <strong>{key.name}</strong> (
                                  <span className="mono">{key.prefix}…</span>) are refused within a second.
                                  This cannot be undone.
                                </p>
                                {descendants.length > 0 ? (
                                  <>
                                    <p>These keys were created with it and are revoked with it:</p>
                                    <ul>
                                      {descendants.map((descendant) => (
                                        <li key={descendant.id}>
                                          {descendant.name}{' '}
                                          <span className="mono muted">{descendant.prefix}…</span>
                                        </li>
                                      ))}
                                    </ul>
                                  </>
                                ) : (
                                  <p className="muted">No active key was created with it.</p>
                                )}
                              </ConfirmButton>
                            )}
                          </td>
                        )}
                      </tr>
                    )
                  })}
                </tbody>
              </table>
              {matching.length > PAGE_SIZE && (
                <Pagination
                  page={page}
                  pageSize={PAGE_SIZE}
                  shown={shown.length}
                  total={matching.length}
                  onPage={(next) => void navigate({ search: (prev) => ({ ...prev, page: next }) })}
                />
              )}
            </>
          )}
        </section>
      )}
    </>
  )
}

/**
 * The key just created, shown this once: hidden until asked for, copyable without being shown,
 * gone from the page (and memory) when the person says they stored it or leaves the page.
 */
function NewKeyPanel(props: { created: CreatedApiKey; onDone(): void }) {
  const [shown, setShown] = useState(false)
  const heading = useRef<HTMLHeadingElement>(null)
  const { created } = props
  useEffect(() => {
    heading.current?.focus()
  }, [])
  return (
    <section className="section api-keys-new" aria-labelledby="api-keys-new-title">
      <h2 id="api-keys-new-title" ref={heading} tabIndex={-1}>
        Your new API key “{created.name}”
      </h2>
      <Notice tone="warning">
        <strong>Copy the key now: it will not be shown again.</strong> The service keeps only a hash of it.
        Store it where its program reads secrets from; if it is lost, revoke it and create another.
      </Notice>
      <div className="api-keys-secret-row">
        <span className="api-keys-secret-label">API key</span>
        <code className="api-keys-secret">{shown ? created.key : `${created.prefix}${'•'.repeat(24)}`}</code>
        <Button variant="secondary" onPress={() => setShown(!shown)}>
          {shown ? 'Hide key' : 'Show key'}
        </Button>
        <CopyButton value={created.key} label="Copy key" />
      </div>
      <dl className="dl api-keys-new-details">
        <dt>Scopes</dt>
        <dd>{created.scopes.join(', ')}</dd>
        <dt>Expires</dt>
        <dd>
          <Time value={created.expiresAt} />
        </dd>
        <dt>Use</dt>
        <dd>
          <code>curl -H "X-Api-Key: $KMS_API_KEY" {window.location.origin}/api/v1/tenant</code>
        </dd>
      </dl>
      <Button variant="primary" onPress={props.onDone}>
        I have stored the key
      </Button>
    </section>
  )
}
