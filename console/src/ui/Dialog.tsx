import type { ReactNode } from 'react'
import { Dialog, DialogTrigger, Heading, Modal, ModalOverlay } from 'react-aria-components'
import { Button } from './Button.tsx'

/**
 * A modal dialog opened by its trigger; focus moves into it and returns to the trigger when it
 * closes (Escape closes it). `children` gets `close` to end it from a form's success.
 */
export function DialogButton(props: {
  label: string
  /** The trigger's accessible name when its visible label is not enough (a row's "Revoke"). */
  accessibleLabel?: string
  title: string
  variant?: 'primary' | 'secondary' | 'danger' | 'quiet'
  disabledReason?: string | undefined
  isDismissable?: boolean
  children: (close: () => void) => ReactNode
}) {
  return (
    <DialogTrigger>
      <Button
        variant={props.variant ?? 'secondary'}
        disabledReason={props.disabledReason}
        aria-label={props.accessibleLabel}
      >
        {props.label}
      </Button>
      <ModalOverlay className="modal-overlay" isDismissable={props.isDismissable ?? true}>
        <Modal className="modal">
          <Dialog className="dialog">
            {({ close }) => (
              <>
                <Heading slot="title" level={2}>
                  {props.title}
                </Heading>
                {props.children(close)}
              </>
            )}
          </Dialog>
        </Modal>
      </ModalOverlay>
    </DialogTrigger>
  )
}
