import { CopyButton } from './CopyButton.tsx'

/** Single-quotes a value for a POSIX shell. */
const shellQuote = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`

/** The curl line for the same API call; the token is never in it (`$KMS_TOKEN`). */
function curlLine(method: string, path: string, body?: unknown): string {
  const parts = [
    'curl',
    ...(method === 'GET' ? [] : ['-X', method]),
    shellQuote(`${window.location.origin}${path}`),
    '-H',
    // Double quotes: the shell expands $KMS_TOKEN (the token itself is never in the line).
    '"Authorization: Bearer $KMS_TOKEN"',
  ]
  if (body !== undefined)
    parts.push('-H', shellQuote('Content-Type: application/json'), '-d', shellQuote(JSON.stringify(body)))
  return parts.join(' ')
}

/**
 * "Equivalent request": what a form sends, as a curl line to run from a terminal with an API key
 * or token in KMS_TOKEN (docs/console.md). Shown under each form, updated as the form changes.
 */
export function EquivalentRequest(props: { method: string; path: string; body?: unknown }) {
  const line = curlLine(props.method, props.path, props.body)
  return (
    <details className="equivalent-request">
      <summary>Equivalent request</summary>
      <pre>
        <code>{line}</code>
      </pre>
      <CopyButton value={line} label="Copy curl" />
    </details>
  )
}
