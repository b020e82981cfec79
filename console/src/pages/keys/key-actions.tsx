import { useMutation, useQueryClient } from '@tanstack/react-query'
import { type ReactNode, useState } from 'react'
import { api, must } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { DialogButton } from '../../ui/Dialog.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { TextInput } from '../../ui/Field.tsx'
import { formatDateTime, type Key } from './keys-model.ts'

/**
 * A change to a key: the answer replaces the cached key, and every other Keys query (the list,
 * versions, the policy) is fetched again.
 */
export function useKeyChange<T>(keyId: string, run: (input: T) => Promise<Key>) {
  const queryClient = useQueryClient()
  return useMutation({
    mutationFn: run,
    onSuccess: async (key) => {
      queryClient.setQueryData(['keys', 'detail', keyId], key)
      await queryClient.invalidateQueries({
        queryKey: ['keys'],
        predicate: (query) => query.queryKey[1] !== 'detail',
      })
    },
  })
}

/** Why the person cannot change the key (role first, then the key's state); undefined: they can. */
export function useWriteBlock(key: Key): string | undefined {
  const { can } = useWorkspace()
  if (!can('keys:write')) return needsScope('keys:write')
  if (key.state === 'Destroyed') return 'A destroyed key cannot be changed'
  return undefined
}

/** A success message shown in its section until the next action there. */
export function useNotice() {
  return useState<string | undefined>()
}

/**
 * The inside of a confirmation dialog: what happens, the equivalent request, Cancel and the
 * action (which closes the dialog when it succeeds, or shows the API's message).
 */
export function ConfirmBody(props: {
  close(): void
  children: ReactNode
  confirmLabel: string
  variant?: 'primary' | 'danger'
  request: { method: string; path: string; body?: unknown }
  onConfirm(): Promise<unknown>
  confirmDisabledReason?: string | undefined
}) {
  const action = useMutation({ mutationFn: props.onConfirm, onSuccess: () => props.close() })
  return (
    <div className="stack">
      {props.children}
      <ErrorAlert error={action.error} />
      <div className="row keys-dialog-actions">
        <Button onPress={props.close}>Cancel</Button>
        <Button
          variant={props.variant ?? 'primary'}
          isDisabled={action.isPending}
          disabledReason={props.confirmDisabledReason}
          onPress={() => action.mutate()}
        >
          {action.isPending ? 'Working…' : props.confirmLabel}
        </Button>
      </div>
      <EquivalentRequest {...props.request} />
    </div>
  )
}

const DELETION = { min: 7, max: 30, default: 30 }

function ScheduleDeletion(props: { keyRecord: Key; close(): void; onDone(message: string): void }) {
  const { keyRecord: key } = props
  const [days, setDays] = useState(String(DELETION.default))
  const change = useKeyChange(key.id, async (pendingWindowDays: number) =>
    must(
      await api.DELETE('/api/v1/keys/{keyId}', {
        params: { path: { keyId: key.id }, query: { pendingWindowDays } },
      }),
    ),
  )
  const number = Number(days)
  const problem =
    Number.isInteger(number) && number >= DELETION.min && number <= DELETION.max
      ? undefined
      : `Choose a whole number of days from ${DELETION.min} to ${DELETION.max}`
  return (
    <ConfirmBody
      close={props.close}
      confirmLabel="Schedule deletion"
      variant="danger"
      confirmDisabledReason={problem}
      request={{
        method: 'DELETE',
        path: `/api/v1/keys/${key.id}?pendingWindowDays=${problem ? DELETION.default : number}`,
      }}
      onConfirm={async () => {
        const updated = await change.mutateAsync(number)
        props.onDone(
          `Deletion scheduled: ${updated.name} will be destroyed on ${formatDateTime(updated.scheduledDeletionDate)} unless you cancel it.`,
        )
      }}
    >
      <p>
        <strong>{key.name}</strong> stops encrypting and signing now. After the waiting period its key
        material is destroyed for good: data encrypted under it can never be decrypted again. Until then you
        can cancel the deletion.
      </p>
      <TextInput
        label="Waiting period (days)"
        type="number"
        value={days}
        onChange={setDays}
        error={problem}
        description={`From ${DELETION.min} to ${DELETION.max} days (default ${DELETION.default}).`}
      />
    </ConfirmBody>
  )
}

/** Revoke, schedule deletion and cancel it: what the key's state allows, each confirmed. */
export function LifecycleSection(props: { keyRecord: Key }) {
  const { keyRecord: key } = props
  const blocked = useWriteBlock(key)
  const [notice, setNotice] = useNotice()
  const cancel = useKeyChange(key.id, async () =>
    must(await api.POST('/api/v1/keys/{keyId}/cancel-deletion', { params: { path: { keyId: key.id } } })),
  )
  const revokeBlock =
    blocked ??
    (key.state === 'Active' ? undefined : `Only an Active key can be revoked (this one is ${key.state})`)
  const deleteBlock =
    blocked ?? (key.state === 'Pending Deletion' ? 'The deletion is already scheduled' : undefined)
  return (
    <section className="section keys-section" aria-labelledby="keys-lifecycle">
      <h2 id="keys-lifecycle">Lifecycle</h2>
      {key.state === 'Pending Deletion' && (
        <Notice tone="warning">
          Scheduled for destruction on <strong>{formatDateTime(key.scheduledDeletionDate)}</strong>. Until
          then the key still decrypts and verifies, and the deletion can be cancelled.
        </Notice>
      )}
      {notice && <Notice tone="success">{notice}</Notice>}
      <ErrorAlert error={cancel.error} title="The deletion was not cancelled" />
      <div className="keys-actions">
        {key.state === 'Pending Deletion' && (
          <div className="keys-action">
            <Button
              variant="primary"
              isDisabled={cancel.isPending}
              disabledReason={blocked}
              onPress={() =>
                cancel.mutate(undefined, {
                  onSuccess: (updated) =>
                    setNotice(`Deletion cancelled: ${updated.name} is ${updated.state} again.`),
                })
              }
            >
              Cancel deletion
            </Button>
            <p className="muted">Keeps the key; it returns to the state it had.</p>
          </div>
        )}
        <div className="keys-action">
          <DialogButton
            label="Revoke…"
            title={`Revoke ${key.name}?`}
            variant="danger"
            disabledReason={revokeBlock}
          >
            {(close) => <RevokeBody keyRecord={key} close={close} onDone={setNotice} />}
          </DialogButton>
          <p className="muted">Stops encrypting and signing for good; decrypt and verify still work.</p>
        </div>
        <div className="keys-action">
          <DialogButton
            label="Schedule deletion…"
            title={`Schedule the deletion of ${key.name}?`}
            variant="danger"
            disabledReason={deleteBlock}
          >
            {(close) => <ScheduleDeletion keyRecord={key} close={close} onDone={setNotice} />}
          </DialogButton>
          <p className="muted">Destroys the key material after a waiting period of 7 to 30 days.</p>
        </div>
      </div>
    </section>
  )
}

function RevokeBody(props: { keyRecord: Key; close(): void; onDone(message: string): void }) {
  const { keyRecord: key } = props
  const revoke = useKeyChange(key.id, async () =>
    must(await api.POST('/api/v1/keys/{keyId}/revoke', { params: { path: { keyId: key.id } } })),
  )
  return (
    <ConfirmBody
      close={props.close}
      confirmLabel="Revoke key"
      variant="danger"
      request={{ method: 'POST', path: `/api/v1/keys/${key.id}/revoke` }}
      onConfirm={async () => {
        const updated = await revoke.mutateAsync(undefined)
        props.onDone(`${updated.name} is revoked: it no longer encrypts or signs.`)
      }}
    >
      <p>
        <strong>{key.name}</strong> will no longer encrypt or sign. Data encrypted under it can still be
        decrypted and signatures verified. <strong>This cannot be undone.</strong>
      </p>
    </ConfirmBody>
  )
}
