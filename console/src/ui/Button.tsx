import { useId } from 'react'
import { Button as AriaButton, type ButtonProps as AriaButtonProps } from 'react-aria-components'

export interface ButtonProps extends AriaButtonProps {
  variant?: 'primary' | 'secondary' | 'danger' | 'quiet'
  /** Disables the button and says why, next to it (read out with the button). */
  disabledReason?: string | undefined
}

/** A button; a disabled one says why (the role lacks a scope, the key is not exportable, ...). */
export function Button({ variant = 'secondary', disabledReason, className, ...props }: ButtonProps) {
  const reasonId = useId()
  const button = (
    <AriaButton
      {...props}
      isDisabled={props.isDisabled || disabledReason !== undefined}
      aria-describedby={disabledReason ? reasonId : props['aria-describedby']}
      className={`button button-${variant}${className ? ` ${String(className)}` : ''}`}
    />
  )
  if (!disabledReason) return button
  return (
    <span className="with-reason">
      {button}
      <span id={reasonId} className="reason">
        {disabledReason}
      </span>
    </span>
  )
}
