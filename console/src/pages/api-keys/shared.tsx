import { type ReactNode, useState } from 'react'
import { Dialog, DialogTrigger, Heading, Modal, ModalOverlay } from 'react-aria-components'
import { ErrorAlert } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'

/**
 * Pieces the administration pages share (API keys, Team, Tenant settings): a button that asks
 * before it acts, and how times are written.
 */

const TIME = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' })

/** A time as the person's locale writes it, machine-readable in `dateTime`. */
export function Time(props: { value: string | null | undefined; none?: string }) {
  if (!props.value) return <span className="muted">{props.none ?? 'Never'}</span>
  return (
    <time className="admin-time" dateTime={props.value}>
      {TIME.format(new Date(props.value))}
    </time>
  )
}

/**
 * A button whose action is confirmed in a dialog first (what happens, in `children`); the
 * dialog stays open with the API's message when the action fails, and closes when it succeeds.
 */
export function ConfirmButton(props: {
  label: string
  /** The button's name when the label alone is ambiguous (one per table row). */
  accessibleLabel?: string
  title: string
  children: ReactNode
  confirmLabel: string
  variant?: 'danger' | 'secondary' | 'quiet'
  disabledReason?: string | undefined
  onConfirm(): Promise<unknown>
}) {
  const [error, setError] = useState<unknown>(null)
  const [pending, setPending] = useState(false)
  const variant = props.variant ?? 'danger'
  return (
    <DialogTrigger onOpenChange={(open) => open && setError(null)}>
      <Button variant={variant} aria-label={props.accessibleLabel} disabledReason={props.disabledReason}>
        {props.label}
      </Button>
      <ModalOverlay className="modal-overlay" isDismissable={!pending} isKeyboardDismissDisabled={pending}>
        <Modal className="modal">
          <Dialog className="dialog" role="alertdialog">
            {({ close }) => (
              <>
                <Heading slot="title" level={2}>
                  {props.title}
                </Heading>
                {props.children}
                <ErrorAlert error={error} />
                <div className="admin-dialog-actions">
                  <Button variant="quiet" isDisabled={pending} onPress={close}>
                    Cancel
                  </Button>
                  <Button
                    variant={variant === 'quiet' ? 'primary' : variant}
                    isDisabled={pending}
                    onPress={async () => {
                      setPending(true)
                      setError(null)
                      try {
                        await props.onConfirm()
                        close()
                      } catch (failure) {
                        setError(failure)
                      } finally {
                        setPending(false)
                      }
                    }}
                  >
                    {pending ? 'Working…' : props.confirmLabel}
                  </Button>
                </div>
              </>
            )}
          </Dialog>
        </Modal>
      </ModalOverlay>
    </DialogTrigger>
  )
}
