import { type ReactNode, useEffect } from 'react'

/** A page's heading (the document title follows it), what it is for, and its main actions. */
export function PageHeader(props: { title: string; description?: ReactNode; actions?: ReactNode }) {
  useEffect(() => {
    document.title = `${props.title} · KMS console`
  }, [props.title])
  return (
    <header className="page-header">
      <div>
        <h1>{props.title}</h1>
        {props.description && <p className="page-description">{props.description}</p>}
      </div>
      {props.actions && <div className="page-actions">{props.actions}</div>}
    </header>
  )
}

/** A list's state when it has nothing to show. */
export function Empty(props: { children: ReactNode }) {
  return <p className="empty">{props.children}</p>
}

export function Loading(props: { what: string }) {
  return (
    <p className="loading" role="status">
      Loading {props.what}…
    </p>
  )
}
