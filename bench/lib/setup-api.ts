import type { SetupApi } from './scenarios.ts'
import type { BenchTenant } from './service-under-test.ts'

/** A tenant's API over plain fetch, for preparing scenarios (keys, envelopes, signatures). */
export function setupApi(baseUrl: string, tenant: BenchTenant): SetupApi {
  let names = 0
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${baseUrl}/api/v1${path}`, {
      method: 'POST',
      headers: { 'x-api-key': tenant.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    const text = await response.text()
    if (!response.ok) throw new Error(`set-up POST ${path}: ${response.status} ${text.slice(0, 300)}`)
    return JSON.parse(text) as Record<string, unknown>
  }
  return {
    post,
    async postBinary(path, body, headers) {
      const response = await fetch(`${baseUrl}/api/v1${path}`, {
        method: 'POST',
        headers: { 'x-api-key': tenant.apiKey, ...headers },
        body: new Uint8Array(body),
      })
      if (!response.ok) throw new Error(`set-up POST ${path}: ${response.status} ${await response.text()}`)
      return Buffer.from(await response.arrayBuffer())
    },
    async createKey(keyType, algorithm) {
      const created = await post('/keys', { name: `setup-${names++}`, keyType, algorithm })
      return created['id'] as string
    },
  }
}
