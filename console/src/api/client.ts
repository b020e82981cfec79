import createClient from 'openapi-fetch'
import { accessToken, currentSession, renew, SignInError, signIn } from '../auth/session.ts'

const here = () => `${window.location.pathname}${window.location.search}`

import type { components, paths } from './schema.ts'

export type Schemas = components['schemas']

/**
 * The API's error answer (`{error, message}`), with the status. Pages show `message`; `error`
 * is the stable code a page may branch on (e.g. `not_found`).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfter?: string | null,
  ) {
    super(message)
  }
}

/**
 * Every API call carries the in-memory access token; a 401 (the token expired or was renewed
 * elsewhere) renews it once and repeats the call.
 */
async function authorizedFetch(request: Request): Promise<Response> {
  const retry = request.clone()
  request.headers.set('authorization', `Bearer ${await accessToken()}`)
  const response = await fetch(request)
  if (response.status !== 401) return response
  const session = await renew().catch((error: unknown) => {
    // The grant is gone (signed out elsewhere, a refresh answer lost, the member removed): sign in
    // again and come back here, rather than show 401s.
    if (error instanceof SignInError && error.code === 'invalid_grant')
      void signIn({ tenantId: currentSession()?.tenantId, returnTo: here() })
    return undefined
  })
  if (!session) return response
  retry.headers.set('authorization', `Bearer ${session.accessToken}`)
  return fetch(retry)
}

export const api = createClient<paths, 'application/json'>({
  baseUrl: window.location.origin,
  fetch: authorizedFetch,
})

/** The answer's data, or an ApiError with the API's code and message. */
export function must<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.response.ok && result.data !== undefined) return result.data
  if (result.response.ok && result.response.status === 204) return undefined as T
  const body = (result.error ?? {}) as { error?: string; message?: string }
  throw new ApiError(
    result.response.status,
    body.error ?? `http_${result.response.status}`,
    body.message ?? `The service answered ${result.response.status}`,
    result.response.headers.get('retry-after'),
  )
}

/** A fetch with the token, for answers that are not JSON (downloads, exports). */
export async function fetchWithToken(path: string, init: RequestInit = {}): Promise<Response> {
  const response = await authorizedFetch(new Request(new URL(path, window.location.origin), init))
  if (!response.ok) {
    const body = (await response.json().catch(() => ({}))) as { error?: string; message?: string }
    throw new ApiError(
      response.status,
      body.error ?? `http_${response.status}`,
      body.message ?? `The service answered ${response.status}`,
    )
  }
  return response
}
