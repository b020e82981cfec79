import { AppError } from '../platform/errors.ts'

/**
 * Parses an `include` query (comma-separated field names, plus shortcut tokens that stand for
 * several fields); the route's schema limits it to letters, commas and spaces. Unknown tokens are a 400 that lists every valid one, before any work is done.
 */
export function parseInclude<F extends string>(
  text: string | undefined,
  fields: readonly F[],
  shortcuts: Readonly<Record<string, readonly F[]>>,
): { fields: Set<F>; tokens: Set<string> } {
  const tokens = new Set(
    (text ?? '')
      .split(',')
      .map((token) => token.trim())
      .filter((token) => token !== ''),
  )
  const valid = [...fields, ...Object.keys(shortcuts)]
  const unknown = [...tokens].filter((token) => !valid.includes(token))
  if (unknown.length > 0) {
    throw new AppError(400, 'validation_failed', `include names unknown fields: ${unknown.join(', ')}`, {
      fields: [{ path: 'querystring/include', message: 'names unknown fields' }],
      allowedFields: valid,
    })
  }
  const selected = new Set<F>()
  for (const token of tokens) {
    for (const field of shortcuts[token] ?? [token as F]) selected.add(field)
  }
  return { fields: selected, tokens }
}
