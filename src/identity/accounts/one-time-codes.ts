import { createHmac, hkdfSync, randomInt, randomUUID, timingSafeEqual } from 'node:crypto'
import type { Sql } from '../../data/database.ts'
import { open, seal } from '../../keyring/aead.ts'
import type { MasterKeyring } from '../../keyring/master-key.ts'
import { type RewrapResult, rewrapEach } from '../../keyring/rewrap.ts'
import { MailError, type Mailer } from '../../mail/mailer.ts'
import type { Clock } from '../../platform/clock.ts'
import type { MailQueue } from '../../platform/module.ts'
import { SmsError, type SmsSender } from '../../sms/sms-sender.ts'
import {
  type AccountOtpRow,
  consumeOtp,
  failOtp,
  getOtp,
  insertOtpWithinLimit,
  otpsToRewrap,
  recordOtpDispatch,
  replaceSealedOtp,
  reserveOtpTry,
} from './account-otp-store.ts'

type OtpChannel = AccountOtpRow['channel']

/**
 * Sign-in codes by e-mail and SMS (docs/identity.md "MFA methods"): six digits, ten minutes,
 * single use, five wrong tries kill a code, five codes per channel and account per 15 minutes.
 */
export const OTP_POLICY = {
  digits: 6,
  lifetimeMs: 10 * 60_000,
  maxFailedAttempts: 5,
  sendsPerWindow: 5,
  windowMs: 15 * 60_000,
} as const

type OtpCheck = 'ok' | 'invalid'

export interface OneTimeCodes {
  /** A new code to the address or number (older live ones of the channel stop working). */
  send(input: {
    accountId: string
    channel: OtpChannel
    destination: string
  }): Promise<'queued' | 'rate_limited'>
  verify(input: { accountId: string; channel: OtpChannel; code: string }): Promise<OtpCheck>
  /** The job process: sends the code once. */
  deliver(otpId: string, final: boolean): Promise<'sent' | 'failed' | 'skipped'>
  /**
   * Master key rotation: codes not yet sent are sealed again, and their HMAC made again, under
   * the primary key. A code already sent is kept only as its HMAC, which cannot be made again
   * without the code: it keeps working while its master key is in the keyring, and lives ten
   * minutes at most.
   */
  rewrapSealed(keyring: MasterKeyring): Promise<RewrapResult>
}

const CODE = /^[0-9]{6}$/

/** A sign-in code, by e-mail or SMS, on the mail queue (identity-jobs.ts delivers it). */
export const ONE_TIME_CODE = 'one-time-code'
export interface OneTimeCodeMessage {
  otpId: string
}
const oneTimeCodeId = (otpId: string) => `otp.${otpId}`

export function createOneTimeCodes(deps: {
  sql: Sql
  masterKeys: MasterKeyring
  clock: Clock
  mailQueue?: MailQueue
  mailer?: Mailer
  sms?: SmsSender
}): OneTimeCodes {
  const { sql, clock } = deps
  // Stored codes are HMACs under a key of the master keyring: a database copy alone cannot try
  // the million possible codes against them.
  const hmacKeyOf = (master: { key: { export(): Buffer } }) =>
    Buffer.from(hkdfSync('sha256', master.key.export(), Buffer.alloc(0), 'kms otp hmac v1', 32))
  const hmacKey = (masterKeyId: string) => {
    const master = deps.masterKeys.find(masterKeyId)
    return master ? hmacKeyOf(master) : undefined
  }
  const mac = (key: Buffer, id: string, code: string) =>
    createHmac('sha256', key).update(`${id}:${code}`).digest()
  const aad = (id: string) => `kms otp v1 id:${id}`

  return {
    async send({ accountId, channel, destination }) {
      const now = clock.now()
      const id = randomUUID()
      const code = String(randomInt(0, 10 ** OTP_POLICY.digits)).padStart(OTP_POLICY.digits, '0')
      const primary = deps.masterKeys.primary
      const inserted = await insertOtpWithinLimit(
        sql,
        {
          id,
          account_id: accountId,
          channel,
          destination,
          code_hmac: mac(hmacKey(primary.id)!, id, code),
          code_sealed: seal(primary.key, Buffer.from(code, 'utf8'), aad(id)),
          master_key_id: primary.id,
          created_at: now,
          expires_at: new Date(now.getTime() + OTP_POLICY.lifetimeMs),
        },
        { since: new Date(now.getTime() - OTP_POLICY.windowMs), max: OTP_POLICY.sendsPerWindow },
      )
      if (!inserted) return 'rate_limited'
      await deps.mailQueue?.enqueue(ONE_TIME_CODE, { otpId: id }, oneTimeCodeId(id)).catch(() => {})
      return 'queued'
    },
    async verify({ accountId, channel, code }) {
      const now = clock.now()
      // The try is counted before the comparison (account-wide: the code is the account's).
      const row = await reserveOtpTry(sql, accountId, channel, now, OTP_POLICY.maxFailedAttempts)
      const key = row ? hmacKey(row.master_key_id) : undefined
      if (!row || !key) return 'invalid'
      const candidate = CODE.test(code) ? code : '------'
      if (!timingSafeEqual(mac(key, row.id, candidate), row.code_hmac)) {
        await failOtp(sql, row.id, OTP_POLICY.maxFailedAttempts, now)
        return 'invalid'
      }
      return (await consumeOtp(sql, row.id, now)) ? 'ok' : 'invalid'
    },
    async deliver(otpId, final) {
      const row = await getOtp(sql, otpId)
      if (row?.dispatch_status !== 'queued' || !row.code_sealed) return 'skipped'
      if (row.revoked_at || row.consumed_at || row.expires_at <= clock.now()) return 'skipped'
      const master = deps.masterKeys.find(row.master_key_id)
      if (!master) return 'skipped'
      const code = open(master.key, row.code_sealed, aad(row.id)).toString('utf8')
      const minutes = OTP_POLICY.lifetimeMs / 60_000
      try {
        if (row.channel === 'email') {
          if (!deps.mailer) throw new MailError('smtp_not_configured')
          await deps.mailer.send({
            to: row.destination,
            subject: `Your sign-in code: ${code}`,
            text: `Your sign-in code is ${code}. It works once, for ${minutes} minutes. If you did not try to sign in, ignore this e-mail.\n`,
            html: `<p>Your sign-in code is <strong>${code}</strong>.</p><p>It works once, for ${minutes} minutes. If you did not try to sign in, ignore this e-mail.</p>\n`,
          })
        } else {
          if (!deps.sms) throw new SmsError('sms_not_configured')
          await deps.sms.send({
            to: row.destination,
            body: `Your sign-in code is ${code}. It works for ${minutes} minutes.`,
          })
        }
      } catch (err) {
        const reason =
          err instanceof MailError || err instanceof SmsError ? err.reason : `${row.channel}_failed`
        const permanent = reason === 'smtp_not_configured' || reason === 'sms_not_configured'
        if (!final && !permanent) throw err
        await recordOtpDispatch(sql, { id: row.id, status: 'failed', error: reason })
        return 'failed'
      }
      await recordOtpDispatch(sql, { id: row.id, status: 'sent', error: null })
      return 'sent'
    },
    rewrapSealed: (keyring) =>
      rewrapEach({
        keyring,
        batch: (primaryId, after, limit) => otpsToRewrap(sql, { primaryId, after, limit }),
        aad: (item) => aad(item.id),
        replace: (item, resealed, primary, code) =>
          replaceSealedOtp(sql, {
            id: item.id,
            from: item.sealed,
            to: resealed,
            codeHmac: mac(hmacKeyOf(primary), item.id, code.toString('utf8')),
            masterKeyId: primary.id,
          }),
      }),
  }
}
