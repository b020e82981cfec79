import nodemailer from 'nodemailer'

interface MailMessage {
  to: string
  subject: string
  text: string
  html: string
}

/** Why a message did not go out, as a code safe to store and show (never the server's words). */
export type MailFailure =
  | 'smtp_not_configured'
  | 'smtp_refused'
  | 'smtp_timeout'
  | 'smtp_unreachable'
  | 'smtp_auth_failed'
  | 'smtp_failed'

export class MailError extends Error {
  readonly reason: MailFailure
  constructor(reason: MailFailure) {
    super(`e-mail not sent: ${reason}`)
    this.reason = reason
  }
}

export interface Mailer {
  /** Resolves once the SMTP server accepted the message; MailError otherwise. */
  send(message: MailMessage): Promise<void>
}

export interface MailConfig {
  /** KMS_SMTP_URL, e.g. smtp://user:pass@host:587 or smtps://host:465; absent, nothing is sent. */
  smtpUrl: string | undefined
  from: string
  /** Connection, greeting and socket inactivity bound (the spec's "up to about 30 s"). */
  timeoutMs: number
}

function reasonOf(err: unknown): MailFailure {
  const error = err as { code?: string; responseCode?: number }
  if (error.code === 'ETIMEDOUT' || error.code === 'ESOCKETTIMEDOUT') return 'smtp_timeout'
  if (error.code === 'EAUTH') return 'smtp_auth_failed'
  if (error.code === 'ECONNECTION' || error.code === 'ECONNREFUSED' || error.code === 'EDNS')
    return 'smtp_unreachable'
  if (error.code === 'EENVELOPE' || error.code === 'EMESSAGE' || (error.responseCode ?? 0) >= 400)
    return 'smtp_refused'
  return 'smtp_failed'
}

/**
 * SMTP through nodemailer. The server is the operator's (KMS_SMTP_URL), never chosen by a tenant,
 * so it does not go through the outbound HTTP client's address policy (docs/decisions.md).
 * Every wait is bounded by `timeoutMs`; the callers run in the job process, off the request path.
 */
export function createMailer(config: MailConfig): Mailer {
  const transport = config.smtpUrl
    ? nodemailer.createTransport({
        url: config.smtpUrl,
        connectionTimeout: config.timeoutMs,
        greetingTimeout: config.timeoutMs,
        socketTimeout: config.timeoutMs,
        // Never logs message bodies (they carry one-time links).
        logger: false,
        debug: false,
      } as Parameters<typeof nodemailer.createTransport>[1])
    : undefined
  return {
    async send(message) {
      if (!transport) throw new MailError('smtp_not_configured')
      try {
        await transport.sendMail({ from: config.from, ...message })
      } catch (err) {
        throw new MailError(reasonOf(err))
      }
    },
  }
}
