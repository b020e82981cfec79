import { useState } from 'react'
import { Button } from './Button.tsx'

/**
 * Copies a value to the clipboard without showing it; `value` may be fetched only on the click
 * (a secret copied without being revealed).
 */
export function CopyButton(props: { value: string | (() => Promise<string>); label?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle')
  return (
    <>
      <Button
        variant="quiet"
        onPress={async () => {
          try {
            const value = typeof props.value === 'string' ? props.value : await props.value()
            await navigator.clipboard.writeText(value)
            setState('copied')
          } catch {
            setState('failed')
          }
        }}
      >
        {props.label ?? 'Copy'}
      </Button>
      <span role="status" className="copy-status">
        {state === 'copied' ? 'Copied' : state === 'failed' ? 'Copy failed' : ''}
      </span>
    </>
  )
}
