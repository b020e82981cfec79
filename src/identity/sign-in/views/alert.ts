import { esc } from '../../../web/layout.ts'

/** A form's error above it, announced by screen readers; nothing without one. */
export const alertOf = (error: string | undefined) =>
  error ? `<p class="error" role="alert">${esc(error)}</p>` : ''
