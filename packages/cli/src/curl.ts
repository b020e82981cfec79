/**
 * `--output-curl-string`: the request a command would send, as one POSIX shell line running curl.
 * The credential is never in it: `"$KMS_API_KEY"` or `"$KMS_TOKEN"` stand in for it, for the
 * shell to expand. A binary body the command read from a file (or stdin) is `--data-binary @file`
 * (or `@-`), so the bytes stay where they are.
 */

/** Headers the CLI's client adds that curl needs no copy of. */
const LEFT_OUT = new Set(['user-agent', 'content-length', 'accept-encoding', 'connection'])

/** Single-quoted for a POSIX shell: nothing inside is expanded. */
function shellQuote(text: string): string {
  if (/^[A-Za-z0-9_./:=@%+-]+$/.test(text)) return text
  return `'${text.replace(/'/g, `'\\''`)}'`
}

export async function curlCommand(request: Request, curlBody: string | undefined): Promise<string> {
  const parts = ['curl', '-sS']
  if (request.method !== 'GET') parts.push('-X', request.method)
  parts.push(shellQuote(request.url))
  const headers = [...request.headers.entries()].sort(([a], [b]) => a.localeCompare(b))
  for (const [name, value] of headers) {
    if (LEFT_OUT.has(name)) continue
    if (name === 'x-api-key') parts.push('-H', `"x-api-key: $KMS_API_KEY"`)
    else if (name === 'authorization') parts.push('-H', `"authorization: Bearer $KMS_TOKEN"`)
    else parts.push('-H', shellQuote(`${name}: ${value}`))
  }
  if (request.body !== null) {
    const bytes = new Uint8Array(await request.arrayBuffer())
    parts.push(...bodyArguments(bytes, curlBody))
  }
  return parts.join(' ')
}

function bodyArguments(bytes: Uint8Array, curlBody: string | undefined): string[] {
  if (curlBody !== undefined) return ['--data-binary', shellQuote(curlBody)]
  let text: string | undefined
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {}
  // A shell argument cannot hold a NUL byte: such a body goes through base64 -d.
  if (text !== undefined && !text.includes('\0')) return ['--data-binary', shellQuote(text)]
  return ['--data-binary', `@<(printf %s ${Buffer.from(bytes).toString('base64')} | base64 -d)`]
}
