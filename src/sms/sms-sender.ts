import type { SmsSettings } from '../config.ts'
import { createAllowList } from '../outbound/allow-list.ts'
import { type OutboundClient, OutboundError } from '../outbound/outbound-client.ts'

/** Why a message did not go out, as a code safe to store and show (never the provider's words). */
export type SmsFailure =
  | 'sms_not_configured'
  | 'sms_refused'
  | 'sms_timeout'
  | 'sms_unreachable'
  | 'sms_failed'

export class SmsError extends Error {
  readonly reason: SmsFailure
  constructor(reason: SmsFailure) {
    super(`SMS not sent: ${reason}`)
    this.reason = reason
  }
}

export interface SmsSender {
  /** Resolves once the provider accepted the message; SmsError otherwise. */
  send(message: { to: string; body: string }): Promise<void>
}

/**
 * Twilio's Messages API (`POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, form-encoded
 * To, From, Body, HTTP Basic with the account and its token; 201 with the message resource),
 * through the one guarded outbound client. The provider's host is the operator's, so it is
 * allowed like the entropy sources; the request never follows a redirect and is bounded in time
 * and size. Message bodies (they carry codes) are never logged.
 */
export function createSmsSender(config: SmsSettings, outbound: OutboundClient): SmsSender {
  const base = new URL(config.url)
  const client = outbound.withAllowed(createAllowList([base.hostname]))
  return {
    async send({ to, body }) {
      if (!config.accountSid || !config.authToken || !config.from) throw new SmsError('sms_not_configured')
      const url = new URL(
        `2010-04-01/Accounts/${encodeURIComponent(config.accountSid)}/Messages.json`,
        base.href.endsWith('/') ? base : new URL(`${base.href}/`),
      )
      let status: number
      try {
        const response = await client.request({
          url,
          method: 'POST',
          headers: {
            authorization: `Basic ${Buffer.from(`${config.accountSid}:${config.authToken}`).toString('base64')}`,
            'content-type': 'application/x-www-form-urlencoded',
            accept: 'application/json',
          },
          body: new URLSearchParams({ To: to, From: config.from, Body: body }).toString(),
          timeoutMs: config.timeoutMs,
          maxResponseBytes: 16 * 1024,
          oversize: 'truncate',
        })
        status = response.status
      } catch (err) {
        if (err instanceof OutboundError)
          throw new SmsError(err.code === 'timeout' ? 'sms_timeout' : 'sms_unreachable')
        throw new SmsError('sms_failed')
      }
      if (status >= 200 && status < 300) return
      throw new SmsError(status >= 400 && status < 500 ? 'sms_refused' : 'sms_failed')
    },
  }
}
