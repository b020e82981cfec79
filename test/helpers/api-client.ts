import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import type { HttpResult, TenantWithKey, TestService } from './service.ts'

export const b64 = (data: Uint8Array | string) => Buffer.from(data).toString('base64')
export const unb64 = (text: string) => Buffer.from(text, 'base64')

export const uniqueName = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`

/** Runs `work` over `items` with at most `limit` in flight; results in item order. */
export async function mapConcurrently<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<R>,
) {
  const results = new Array<R>(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const index = next++
      results[index] = await work(items[index]!)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

/**
 * Calls `/api/v1` routes as a tenant. The service and the default tenant are read when a call
 * is made, so a suite can create the client before its `before` hook has started them.
 */
export function apiClient(current: () => { svc: TestService; tenant: TenantWithKey }) {
  function call(
    method: string,
    path: string,
    body?: unknown,
    by?: TenantWithKey | string,
  ): Promise<HttpResult> {
    const who = by ?? current().tenant
    const key = typeof who === 'string' ? who : who.key
    return current().svc.request(method, `/api/v1${path}`, { key, ...(body !== undefined ? { body } : {}) })
  }

  async function createKey(
    keyType: string,
    algorithm: string,
    extra: Record<string, unknown> = {},
    by?: TenantWithKey,
  ): Promise<{ id: string; name: string }> {
    const name = uniqueName(algorithm.toLowerCase())
    const res = await call('POST', '/keys', { name, keyType, algorithm, ...extra }, by)
    assert.equal(res.status, 201, res.text)
    return { id: res.body.id, name }
  }

  return { call, createKey }
}
