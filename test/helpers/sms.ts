import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface CapturedSms {
  accountSid: string
  to: string
  from: string
  body: string
}

export interface TestSmsProvider {
  /** KMS_SMS_URL and the credentials to configure the service with. */
  env: Record<string, string>
  messages: CapturedSms[]
  /** Requests refused (wrong credentials or path). */
  refused: number
  stop(): Promise<void>
}

const SID = 'AC00000000000000000000000000000001'
const TOKEN = 'test-auth-token'

const read = (request: IncomingMessage) =>
  new Promise<string>((resolve) => {
    let body = ''
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8')
    })
    request.on('end', () => resolve(body))
  })

/**
 * A local server speaking the part of Twilio's REST API the service uses: `POST
 * /2010-04-01/Accounts/{AccountSid}/Messages.json`, HTTP Basic with the account SID and auth token,
 * a form body with To, From and Body; 201 with a message resource, 401 with Twilio's error shape
 * for bad credentials, 400 (code 21211) for a number that is not E.164.
 */
export async function startSmsProvider(): Promise<TestSmsProvider> {
  const state: TestSmsProvider = { env: {}, messages: [], refused: 0, stop: async () => {} }
  const server = createServer(async (request, response) => {
    const body = await read(request)
    const json = (status: number, value: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' })
      response.end(JSON.stringify(value))
    }
    const match = /^\/2010-04-01\/Accounts\/([^/]+)\/Messages\.json$/.exec(request.url ?? '')
    const expected = `Basic ${Buffer.from(`${SID}:${TOKEN}`).toString('base64')}`
    if (request.method !== 'POST' || !match) {
      state.refused++
      return json(404, { code: 20404, message: 'The requested resource was not found', status: 404 })
    }
    if (request.headers.authorization !== expected || match[1] !== SID) {
      state.refused++
      return json(401, { code: 20003, message: 'Authenticate', status: 401 })
    }
    const form = new URLSearchParams(body)
    const to = form.get('To') ?? ''
    if (!/^\+[1-9][0-9]{6,14}$/.test(to))
      return json(400, {
        code: 21211,
        message: `The 'To' number ${to} is not a valid phone number.`,
        status: 400,
      })
    const message = { accountSid: match[1]!, to, from: form.get('From') ?? '', body: form.get('Body') ?? '' }
    state.messages.push(message)
    return json(201, {
      sid: `SM${String(state.messages.length).padStart(32, '0')}`,
      account_sid: SID,
      to,
      from: message.from,
      body: message.body,
      status: 'queued',
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as AddressInfo
  state.env = {
    KMS_SMS_URL: `http://127.0.0.1:${port}`,
    KMS_SMS_ACCOUNT_SID: SID,
    KMS_SMS_AUTH_TOKEN: TOKEN,
    KMS_SMS_FROM: '+15005550006',
  }
  state.stop = () => new Promise<void>((resolve) => server.close(() => resolve()))
  return state
}

/** The six-digit code in the newest message to `to`. */
export const smsCodeOf = (provider: TestSmsProvider, to: string): string | undefined =>
  /\b(\d{6})\b/.exec(provider.messages.filter((m) => m.to === to).at(-1)?.body ?? '')?.[1]
