import { useQuery } from '@tanstack/react-query'
import { getRouteApi, Link } from '@tanstack/react-router'
import { useId, useState } from 'react'
import { ToggleButton } from 'react-aria-components'
import { Controller, useForm, useWatch } from 'react-hook-form'
import { ApiError, api, must, type Schemas } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { CopyButton } from '../../ui/CopyButton.tsx'
import { DialogButton } from '../../ui/Dialog.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { FormTextInput } from '../../ui/FormFields.tsx'
import { Empty, Loading, PageHeader } from '../../ui/Page.tsx'
import { ExportPrivateSection } from './ExportPrivateSection.tsx'
import { ConfirmBody, LifecycleSection, useKeyChange, useNotice, useWriteBlock } from './key-actions.tsx'
import { CheckboxField } from './key-form.tsx'
import { ExpiryField, ExpiryText, LabelsField, LabelTags, StateBadge } from './keys-fields.tsx'
import { type Expiry, expiresAtOf, formatDateTime, type Key, takeFlash } from './keys-model.ts'
import { PublicKeySection } from './PublicKeySection.tsx'
import { RotationPolicySection } from './RotationPolicySection.tsx'

const route = getRouteApi('/keys/$keyId')

type Update = Schemas['UpdateKeyRequest']
const patchKey = (keyId: string) => async (body: Update) =>
  must(await api.PATCH('/api/v1/keys/{keyId}', { params: { path: { keyId } }, body }))

/** The operation the Try it page opens for a key of each type. */
const TRY_OPERATION = { Encryption: 'encrypt', Signing: 'sign', HMAC: 'mac' } as const

function FavouriteToggle(props: { keyRecord: Key }) {
  const { keyRecord: key } = props
  const blocked = useWriteBlock(key)
  const reasonId = useId()
  const change = useKeyChange(key.id, patchKey(key.id))
  return (
    <span className="with-reason">
      <ToggleButton
        className="button button-secondary keys-favourite"
        isSelected={key.isFavorite}
        isDisabled={blocked !== undefined || change.isPending}
        aria-describedby={blocked ? reasonId : undefined}
        onChange={(isFavorite) => change.mutate({ isFavorite })}
      >
        <span aria-hidden="true">{key.isFavorite ? '★ ' : '☆ '}</span>
        Favourite
      </ToggleButton>
      {blocked && (
        <span id={reasonId} className="reason">
          {blocked}
        </span>
      )}
      {change.error && <ErrorAlert error={change.error} />}
    </span>
  )
}

interface EditValues {
  name: string
  description: string
  changeExpiry: boolean
  expiry: Expiry
  isDefault: boolean
}

function editBody(key: Key, values: EditValues): Update {
  const name = values.name.trim()
  const body: Update = {}
  if (name !== key.name) body.name = name
  if (values.description !== key.description) body.description = values.description
  if (values.changeExpiry) body.expiresAt = expiresAtOf(values.expiry).value ?? null
  if (values.isDefault !== key.isDefault) body.isDefault = values.isDefault
  return body
}

/** PATCH name, description, expiry (Active keys) and default, only what changed. */
function EditDetails(props: { keyRecord: Key; close(): void; onDone(message: string): void }) {
  const { keyRecord: key } = props
  const { can } = useWorkspace()
  const change = useKeyChange(key.id, patchKey(key.id))
  const { control, handleSubmit, setError } = useForm<EditValues>({
    defaultValues: {
      name: key.name,
      description: key.description,
      changeExpiry: false,
      expiry: { preset: 'none', date: '' },
      isDefault: key.isDefault,
    },
  })
  const values = useWatch({ control }) as EditValues
  const body = editBody(key, values)
  const unchanged = Object.keys(body).length === 0
  return (
    <form
      noValidate
      className="stack"
      onSubmit={handleSubmit((form) =>
        change.mutate(editBody(key, form), {
          onSuccess: (updated) => {
            props.onDone(`Saved the details of ${updated.name}.`)
            props.close()
          },
          onError: (error) => {
            if (error instanceof ApiError && error.code === 'key_name_taken')
              setError('name', { message: error.message })
          },
        }),
      )}
    >
      <FormTextInput
        control={control}
        name="name"
        rules={{ validate: (name) => (name.trim() ? true : 'A key needs a name') }}
        label="Name"
        isRequired
        maxLength={200}
      />
      <FormTextInput
        control={control}
        name="description"
        label="Description"
        multiline
        rows={2}
        maxLength={1000}
      />
      <Controller
        control={control}
        name="changeExpiry"
        render={({ field }) => (
          <CheckboxField
            label="Change the expiry"
            isSelected={field.value}
            onChange={field.onChange}
            isDisabled={key.state !== 'Active'}
            description={
              key.state === 'Active'
                ? `Now: ${key.expiresAt ? formatDateTime(key.expiresAt) : 'no expiry'}.`
                : `Only an Active key's expiry can change (this one is ${key.state}).`
            }
          />
        )}
      />
      {values.changeExpiry && (
        <Controller
          control={control}
          name="expiry"
          rules={{
            validate: (expiry, form) => (form.changeExpiry ? (expiresAtOf(expiry).problem ?? true) : true),
          }}
          render={({ field, fieldState }) => (
            <ExpiryField value={field.value} onChange={field.onChange} error={fieldState.error?.message} />
          )}
        />
      )}
      <Controller
        control={control}
        name="isDefault"
        render={({ field }) => (
          <CheckboxField
            label={`The default ${key.keyType} key`}
            isSelected={field.value}
            onChange={field.onChange}
            isDisabled={!can('encryption:write') || (key.state !== 'Active' && !key.isDefault)}
            description={
              !can('encryption:write')
                ? `${needsScope('encryption:write')}: only members who may encrypt choose the default key.`
                : 'Requests that name no key use the default key of their type.'
            }
          />
        )}
      />
      <ErrorAlert error={change.error} title="The details were not saved" />
      <div className="row keys-dialog-actions">
        <Button onPress={props.close}>Cancel</Button>
        <Button
          type="submit"
          variant="primary"
          isDisabled={change.isPending}
          disabledReason={unchanged ? 'Nothing has changed yet' : undefined}
        >
          Save details
        </Button>
      </div>
      <EquivalentRequest method="PATCH" path={`/api/v1/keys/${key.id}`} body={body} />
    </form>
  )
}

function DetailsSection(props: { keyRecord: Key }) {
  const { keyRecord: key } = props
  const blocked = useWriteBlock(key)
  const [notice, setNotice] = useNotice()
  return (
    <section className="section keys-section" aria-labelledby="keys-details">
      <h2 id="keys-details">Details</h2>
      {notice && <Notice tone="success">{notice}</Notice>}
      <dl className="dl">
        <dt>Id</dt>
        <dd>
          <code>{key.id}</code> <CopyButton value={key.id} label="Copy id" />
        </dd>
        <dt>Type</dt>
        <dd>{key.keyType}</dd>
        <dt>Algorithm</dt>
        <dd>
          <span className="mono">{key.algorithm}</span>
          {key.isPostQuantum ? ' (post-quantum)' : ' (classical)'}
        </dd>
        <dt>Status</dt>
        <dd>
          <StateBadge state={key.state} />
        </dd>
        <dt>Current version</dt>
        <dd>v{key.version}</dd>
        <dt>Origin</dt>
        <dd>{key.origin === 'Imported' ? 'Imported (bring your own key)' : 'Generated by the service'}</dd>
        <dt>Private key export</dt>
        <dd>{key.exportable ? 'Allowed (keys:export)' : 'Not allowed'}</dd>
        <dt>Default key</dt>
        <dd>{key.isDefault ? `Yes, the default ${key.keyType} key` : 'No'}</dd>
        <dt>Created</dt>
        <dd>{formatDateTime(key.createdAt)}</dd>
        <dt>Last changed</dt>
        <dd>{formatDateTime(key.updatedAt)}</dd>
        <dt>Expires</dt>
        <dd>
          <ExpiryText keyRecord={key} />
        </dd>
        <dt>Last rotated</dt>
        <dd>{key.lastRotatedAt ? formatDateTime(key.lastRotatedAt) : 'Never'}</dd>
        <dt>Next rotation</dt>
        <dd>{key.nextRotationAt ? formatDateTime(key.nextRotationAt) : 'None scheduled'}</dd>
        {key.scheduledDeletionDate && (
          <>
            <dt>Destroyed on</dt>
            <dd>{formatDateTime(key.scheduledDeletionDate)}</dd>
          </>
        )}
      </dl>
      <div className="keys-section-actions">
        <DialogButton label="Edit details…" title={`Edit ${key.name}`} disabledReason={blocked}>
          {(close) => <EditDetails keyRecord={key} close={close} onDone={setNotice} />}
        </DialogButton>
      </div>
    </section>
  )
}

function LabelsSection(props: { keyRecord: Key }) {
  const { keyRecord: key } = props
  const blocked = useWriteBlock(key)
  const [editing, setEditing] = useState<string[] | undefined>()
  const [notice, setNotice] = useNotice()
  const change = useKeyChange(key.id, patchKey(key.id))
  return (
    <section className="section keys-section" aria-labelledby="keys-labels">
      <h2 id="keys-labels">Labels</h2>
      {notice && <Notice tone="success">{notice}</Notice>}
      {editing ? (
        <form
          noValidate
          className="stack"
          onSubmit={(event) => {
            event.preventDefault()
            change.mutate(
              { labels: editing },
              {
                onSuccess: (updated) => {
                  setEditing(undefined)
                  setNotice(
                    updated.labels.length > 0
                      ? `Labels saved: ${updated.labels.join(', ')}.`
                      : 'Labels removed.',
                  )
                },
              },
            )
          }}
        >
          <LabelsField
            label="Labels"
            description="Press Enter or Add after each; remove one with its × button."
            value={editing}
            onChange={setEditing}
          />
          <ErrorAlert error={change.error} title="The labels were not saved" />
          <div className="row">
            <Button type="submit" variant="primary" isDisabled={change.isPending}>
              Save labels
            </Button>
            <Button onPress={() => setEditing(undefined)}>Cancel</Button>
          </div>
          <EquivalentRequest method="PATCH" path={`/api/v1/keys/${key.id}`} body={{ labels: editing }} />
        </form>
      ) : (
        <>
          {key.labels.length > 0 ? (
            <LabelTags label={`Labels of ${key.name}`} labels={key.labels} />
          ) : (
            <p className="muted">No labels yet. Labels help find and group keys in the list.</p>
          )}
          <div className="keys-section-actions">
            <Button
              disabledReason={blocked}
              onPress={() => {
                setNotice(undefined)
                setEditing([...key.labels])
              }}
            >
              Edit labels
            </Button>
          </div>
        </>
      )}
    </section>
  )
}

function VersionsSection(props: {
  keyRecord: Key
  versions: Schemas['KeyVersionList']['data'] | undefined
  error: unknown
}) {
  const { keyRecord: key } = props
  const blocked = useWriteBlock(key)
  const [notice, setNotice] = useNotice()
  const rotate = useKeyChange(key.id, async () =>
    must(await api.POST('/api/v1/keys/{keyId}/rotate', { params: { path: { keyId: key.id } } })),
  )
  const rotateBlock =
    blocked ??
    (key.state === 'Active' ? undefined : `Only an Active key can be rotated (this one is ${key.state})`)
  return (
    <section className="section keys-section" aria-labelledby="keys-versions">
      <h2 id="keys-versions">Versions</h2>
      <p className="muted">
        Rotation adds a version with new material under the same id. New operations use the current version;
        earlier ones still decrypt and verify.
      </p>
      {notice && <Notice tone="success">{notice}</Notice>}
      <ErrorAlert error={props.error} title="The versions could not be read" />
      {props.versions ? (
        <table className="table keys-versions-table">
          <caption className="visually-hidden">Versions of {key.name}</caption>
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">Created</th>
              <th scope="col">State</th>
            </tr>
          </thead>
          <tbody>
            {[...props.versions]
              .sort((a, b) => b.version - a.version)
              .map((version) => (
                <tr key={version.version}>
                  <td>
                    v{version.version}
                    {version.isCurrent && (
                      <span className="badge badge-accent keys-inline-badge">Current</span>
                    )}
                  </td>
                  <td>{formatDateTime(version.createdAt)}</td>
                  <td>
                    <StateBadge state={version.state} />
                  </td>
                </tr>
              ))}
          </tbody>
        </table>
      ) : (
        !props.error && <Loading what="versions" />
      )}
      <div className="keys-section-actions">
        <DialogButton label="Rotate now…" title={`Rotate ${key.name}?`} disabledReason={rotateBlock}>
          {(close) => (
            <ConfirmBody
              close={close}
              confirmLabel="Rotate key"
              request={{ method: 'POST', path: `/api/v1/keys/${key.id}/rotate` }}
              onConfirm={async () => {
                const updated = await rotate.mutateAsync(undefined)
                setNotice(`Rotated: version ${updated.version} is now current.`)
              }}
            >
              <p>
                A new version, v{key.version + 1}, with new key material becomes current. Version
                {key.version > 1 ? 's' : ''} v1{key.version > 1 ? `–v${key.version}` : ''} stay for decrypting
                and verifying.
              </p>
            </ConfirmBody>
          )}
        </DialogButton>
      </div>
    </section>
  )
}

/** /keys/$keyId: everything about one key and what can be done with it. */
export function KeyDetailPage() {
  const { keyId } = route.useParams()
  const { can } = useWorkspace()
  const [flash] = useState(() => takeFlash(keyId))
  const key = useQuery({
    queryKey: ['keys', 'detail', keyId],
    queryFn: async () => must(await api.GET('/api/v1/keys/{keyId}', { params: { path: { keyId } } })),
  })
  const versions = useQuery({
    queryKey: ['keys', 'versions', keyId],
    queryFn: async () =>
      must(await api.GET('/api/v1/keys/{keyId}/versions', { params: { path: { keyId } } })).data,
    enabled: key.isSuccess,
  })
  if (key.isPending)
    return (
      <div className="keys-page">
        <PageHeader title="Key" />
        <Loading what="the key" />
      </div>
    )
  if (!key.data) {
    const missing =
      key.error instanceof ApiError && (key.error.code === 'key_not_found' || key.error.status === 400)
    return (
      <div className="keys-page">
        <PageHeader
          title={missing ? 'Key not found' : 'Key'}
          actions={<Link to="/keys">Back to keys</Link>}
        />
        {missing ? (
          <Empty>There is no key with this id in this tenant. It may be in another tenant.</Empty>
        ) : (
          <ErrorAlert error={key.error} title="The key could not be read" />
        )}
      </div>
    )
  }
  const data = key.data
  const versionNumbers = versions.data?.map((version) => version.version) ?? []
  return (
    // Keyed by the key: another key's page starts with fresh sections (no choices carried over).
    <div className="keys-page" key={keyId}>
      <PageHeader
        title={data.name}
        description={
          <>
            <StateBadge state={data.state} /> {data.keyType} key,{' '}
            <span className="mono">{data.algorithm}</span>, version {data.version}
            {data.description ? ` · ${data.description}` : ''}
          </>
        }
        actions={
          <>
            <FavouriteToggle keyRecord={data} />
            {data.state === 'Active' && (can('encryption:write') || can('encrypt:invoke')) && (
              <Link
                to="/try"
                search={{ keyId: data.id, op: TRY_OPERATION[data.keyType] }}
                className="keys-link-button"
              >
                Try it with this key
              </Link>
            )}
            <Link to="/keys" className="keys-link-button">
              All keys
            </Link>
          </>
        }
      />
      {flash && <Notice tone="success">{flash}</Notice>}
      <DetailsSection keyRecord={data} />
      <LabelsSection keyRecord={data} />
      <VersionsSection keyRecord={data} versions={versions.data} error={versions.error} />
      <RotationPolicySection keyRecord={data} />
      <PublicKeySection keyRecord={data} versions={versionNumbers} />
      <ExportPrivateSection keyRecord={data} versions={versionNumbers} />
      <LifecycleSection keyRecord={data} />
    </div>
  )
}
