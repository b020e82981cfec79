import type { ReactNode } from 'react'
import { ApiError } from '../api/client.ts'

/** An error the person must see: the API's message (and code), read out at once. */
export function ErrorAlert(props: { error: unknown; title?: string }) {
  if (!props.error) return null
  const error = props.error
  const message = error instanceof Error ? error.message : String(error)
  const code = error instanceof ApiError ? error.code : undefined
  return (
    <div className="alert alert-error" role="alert">
      {props.title && <strong>{props.title}: </strong>}
      {message}
      {code && <span className="code-badge"> ({code})</span>}
    </div>
  )
}

/** A success or a state to notice, announced politely. */
export function Notice(props: { children: ReactNode; tone?: 'success' | 'info' | 'warning' }) {
  return (
    <div className={`alert alert-${props.tone ?? 'info'}`} role="status">
      {props.children}
    </div>
  )
}
