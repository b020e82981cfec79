import { createHash, randomUUID } from 'node:crypto'
import type { Queryable, Sql } from '../../data/database.ts'
import { open, seal } from '../../keyring/aead.ts'
import type { MasterKeyring } from '../../keyring/master-key.ts'
import { type RewrapResult, rewrapEach } from '../../keyring/rewrap.ts'
import type { Clock } from '../../platform/clock.ts'
import { AppError, invalidField, isUniqueViolation } from '../../platform/errors.ts'
import {
  type AccountRow,
  clearFailures,
  clearTotp,
  confirmTotp,
  deleteAccount,
  findAccountByEmail,
  getAccount,
  getAccounts,
  insertAccount,
  lockSpentCounters,
  releaseAttempt,
  replaceSealedTotp,
  reserveAttempt,
  setDisabled,
  setPasswordHash,
  setTotpSecret,
  setVerifiedPhone,
  sweepThrottle,
  type ThrottleCounter,
  totpSecretsToRewrap,
  useTotpStep,
} from './account-store.ts'
import { decoyHash, hashPassword, MAX_PASSWORD_LENGTH, verifyPassword } from './password-hash.ts'
import { base32Encode, matchTotp, newTotpSecret, otpauthUri } from './totp.ts'

export const TEAM_REALM = 'team'
/** The realm of partners' people: they sign in to the partner portal (src/partners). */
export const PARTNER_REALM = 'partners'
/** The realm of a tenant's end-users: the same address in two tenants is two accounts. */
export const tenantRealm = (tenantId: string) => `tenant:${tenantId}`
/** The tenant whose end-users a realm holds; undefined for the team realm. */
export const tenantOfRealm = (realm: string): string | undefined =>
  realm.startsWith('tenant:') ? realm.slice('tenant:'.length) : undefined

interface AccountView {
  id: string
  realm: string
  email: string
  displayName: string | null
  hasPassword: boolean
  totpEnrolled: boolean
  /** A verified phone number (the SMS factor), or null. */
  phoneNumber: string | null
  disabled: boolean
  createdAt: string
}

const toView = (row: AccountRow): AccountView => ({
  id: row.id,
  realm: row.realm,
  email: row.email,
  displayName: row.display_name,
  hasPassword: row.password_hash !== null,
  totpEnrolled: row.totp_enrolled_at !== null,
  phoneNumber: row.phone_verified_at ? row.phone_number : null,
  disabled: row.disabled_at !== null,
  createdAt: row.created_at.toISOString(),
})

/** What a password must satisfy (tenant settings decide it for their realms; the team realm's is fixed). */
export interface PasswordPolicy {
  minLength: number
  requireUppercase: boolean
  requireLowercase: boolean
  requireDigit: boolean
  requireSymbol: boolean
}

export const TEAM_PASSWORD_POLICY: PasswordPolicy = {
  minLength: 12,
  requireUppercase: false,
  requireLowercase: false,
  requireDigit: false,
  requireSymbol: false,
}

/**
 * Throttling (docs/identity.md): attempts count per (account, client address) and per client
 * address. Five wrong passwords for one account from one address lock that pair for 15 minutes;
 * fifty failures from one address lock the address. An attacker elsewhere never locks the owner
 * out of the password: the owner's own address has its own count. Each attempt is counted before
 * it is checked, so simultaneous requests get no more checks than the limits.
 *
 * TOTP codes count the same way, and also per account from every address together: ten wrong
 * codes in 15 minutes lock the account's TOTP everywhere for 15 minutes. Whoever reaches the code
 * already knows the password, and a million codes (three valid at a time) would otherwise fall
 * to enough addresses; the price, that such a person can hold the owner's TOTP step shut, is the
 * owner's cue to change the password.
 */
export const THROTTLE = {
  windowMs: 15 * 60_000,
  perAccountLimit: 5,
  perAddressLimit: 50,
  totpPerAccountLimit: 10,
  lockMs: 15 * 60_000,
} as const

type SignInResult =
  | { outcome: 'ok'; account: AccountView }
  | { outcome: 'invalid' }
  /** The password was right but sign-in is disabled (a blocked end-user): said only to who knows it. */
  | { outcome: 'blocked' }
  | { outcome: 'locked'; retryAfterSeconds: number }

type TotpCheck = 'ok' | 'invalid' | 'locked'

const accountExists = () =>
  new AppError(409, 'account_exists', 'An account with this e-mail address already exists')

// No white space, no control characters (NUL cannot even be stored), one @, a dotted domain.
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
const EMAIL = /^[^\s@\u0000-\u001f\u007f]{1,64}@[^\s@.\u0000-\u001f\u007f]+(\.[^\s@.\u0000-\u001f\u007f]+)+$/

/** Throttle rows name an account by a hash: the table holds no addresses (and any input fits it). */
const throttleSubject = (realm: string, emailNormalized: string) =>
  `${realm}:${createHash('sha256').update(emailNormalized, 'utf8').digest('base64url')}`

/** Could be an address (bounded, the shape of one): what is not is never looked up. */
export const isPlausibleEmail = (normalized: string) => normalized.length <= 254 && EMAIL.test(normalized)

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase()
}

export function checkEmail(email: string, field = 'email'): string {
  const trimmed = email.trim()
  if (trimmed.length > 254 || !EMAIL.test(trimmed))
    throw invalidField(field, 'must be an e-mail address (at most 254 characters)')
  return trimmed
}

/** Every reason a password falls short, for the form or the 400's message. */
export function passwordProblems(password: string, policy: PasswordPolicy): string[] {
  const problems: string[] = []
  if (password.length < policy.minLength) problems.push(`at least ${policy.minLength} characters`)
  if (password.length > MAX_PASSWORD_LENGTH) problems.push(`at most ${MAX_PASSWORD_LENGTH} characters`)
  if (policy.requireUppercase && !/\p{Lu}/u.test(password)) problems.push('an upper-case letter')
  if (policy.requireLowercase && !/\p{Ll}/u.test(password)) problems.push('a lower-case letter')
  if (policy.requireDigit && !/\p{Nd}/u.test(password)) problems.push('a digit')
  if (policy.requireSymbol && !/[^\p{L}\p{Nd}\s]/u.test(password)) problems.push('a symbol')
  return problems
}

/** A new account: a password to hash, one hashed beforehand, or none yet (a set-up link follows). */
interface NewAccount {
  id?: string
  email: string
  displayName?: string | null
  password?: string | null
  /** A password hashed beforehand (preparePassword), so no hashing happens inside `tx`. */
  passwordHash?: string
}

export interface AccountService {
  /** 409 `account_exists` when the realm has the address. */
  createTeamAccount(
    input: { email: string; displayName?: string | null; password?: string | null },
    tx?: Queryable,
  ): Promise<AccountView>
  /** An account of any realm (a tenant's end-users: `tenantRealm(id)`); 409 `account_exists`. */
  createAccount(realm: string, input: NewAccount, tx?: Queryable): Promise<AccountView>
  findAccount(realm: string, email: string, tx?: Queryable): Promise<AccountView | undefined>
  get(id: string): Promise<AccountView | undefined>
  getMany(ids: readonly string[]): Promise<AccountView[]>
  findTeamAccount(email: string): Promise<AccountView | undefined>
  /** The argon2id hash of a password that meets the policy, or every way it falls short. */
  preparePassword(
    password: string,
    policy: PasswordPolicy,
  ): Promise<{ hash: string; problems?: undefined } | { hash?: undefined; problems: string[] }>
  /** 400 naming `password` when the policy is not met. */
  setPassword(id: string, password: string, policy?: PasswordPolicy): Promise<void>
  /**
   * The same answer for an unknown address and a wrong password; `blocked` only after the right
   * password. The realm is the team's unless said.
   */
  signIn(input: { realm?: string; email: string; password: string; clientIp: string }): Promise<SignInResult>
  /** Records a phone number the person proved with a code sent to it. */
  setVerifiedPhone(id: string, phone: string): Promise<void>
  /** The identity half of block and unblock; false when the account does not exist. */
  setSignInEnabled(id: string, enabled: boolean, tx?: Queryable): Promise<boolean>
  /** Removes the identity user (credentials, factors, links); false when it was already gone. */
  removeAccount(id: string, tx?: Queryable): Promise<boolean>
  /** Checks a password of a known account (the accept-invitation page), throttled like signIn. */
  checkPassword(id: string, password: string, clientIp: string): Promise<SignInResult>
  /** The secret to enrol: the unconfirmed one if there is one, else a new one; 409 once enrolled. */
  beginTotpEnrolment(id: string, issuer: string): Promise<{ secret: string; uri: string }>
  confirmTotpEnrolment(id: string, code: string, clientIp: string): Promise<TotpCheck>
  verifyTotp(id: string, code: string, clientIp: string): Promise<TotpCheck>
  resetTotp(id: string): Promise<void>
  /** Deletes throttle rows whose window and lock have both ended. */
  sweepThrottle(): Promise<number>
  /** Master key rotation: every TOTP secret (enrolled or pending) is sealed again under the primary key. */
  rewrapSealed(keyring: MasterKeyring): Promise<RewrapResult>
}

export function createAccountService(deps: {
  sql: Sql
  masterKeys: MasterKeyring
  clock: Clock
}): AccountService {
  const { sql, masterKeys, clock } = deps
  const totpAad = (id: string) => `kms totp secret v1 account:${id}`

  /**
   * The counters an attempt is held to: the account from this address, the address, and (for a
   * second factor) the account from every address.
   */
  const countersOf = (subject: string, clientIp: string, accountWide: boolean): ThrottleCounter[] => [
    { subject, clientIp, limit: THROTTLE.perAccountLimit },
    { subject: '*', clientIp, limit: THROTTLE.perAddressLimit },
    ...(accountWide ? [{ subject, clientIp: '*', limit: THROTTLE.totpPerAccountLimit }] : []),
  ]

  /** Counts the attempt before the check; the seconds to wait when a counter refuses it, else 0. */
  async function reserve(counters: ThrottleCounter[]): Promise<number> {
    const reservation = await reserveAttempt(sql, {
      counters,
      now: clock.now(),
      windowMs: THROTTLE.windowMs,
    })
    return reservation.reserved ? 0 : Math.ceil(reservation.retryAfterMs / 1000)
  }

  const failed = (counters: ThrottleCounter[]) =>
    lockSpentCounters(sql, { counters, now: clock.now(), lockMs: THROTTLE.lockMs })

  /**
   * A success clears the account's count from this address (as before the reservations), and
   * gives its own reservation back to the shared counters without forgiving others' failures.
   */
  async function succeeded([pair, ...shared]: ThrottleCounter[]): Promise<void> {
    await clearFailures(sql, pair!.subject, pair!.clientIp)
    for (const counter of shared) await releaseAttempt(sql, counter.subject, counter.clientIp)
  }

  async function passwordAttempt(
    subject: string,
    row: AccountRow | undefined,
    password: string,
    clientIp: string,
  ): Promise<SignInResult> {
    // No account-wide count for passwords: it would let anyone lock the owner out from anywhere.
    const counters = countersOf(subject, clientIp, false)
    const locked = await reserve(counters)
    if (locked > 0) return { outcome: 'locked', retryAfterSeconds: locked }
    const candidate = password.length <= MAX_PASSWORD_LENGTH ? password : ''
    // Always one argon2id verification, against a decoy when there is no usable hash.
    const ok = await verifyPassword(candidate, row?.password_hash ?? (await decoyHash()))
    if (!ok || !row || row.password_hash === null || candidate !== password) {
      await failed(counters)
      return { outcome: 'invalid' }
    }
    await succeeded(counters)
    if (row.disabled_at !== null) return { outcome: 'blocked' }
    return { outcome: 'ok', account: toView(row) }
  }

  async function totpAttempt(
    id: string,
    code: string,
    clientIp: string,
    confirm: boolean,
  ): Promise<TotpCheck> {
    const row = await getAccount(sql, id)
    const pending = confirm ? row?.totp_enrolled_at === null : row?.totp_enrolled_at !== null
    if (!row || !pending || !row.totp_secret_sealed || !row.totp_master_key_id) return 'invalid'
    const masterKey = masterKeys.find(row.totp_master_key_id)
    if (!masterKey) return 'invalid'
    // Counted before the code is compared; enrolment and sign-in share the counts.
    const counters = countersOf(`totp:${id}`, clientIp, true)
    if ((await reserve(counters)) > 0) return 'locked'
    const secret = open(masterKey.key, row.totp_secret_sealed, totpAad(id))
    const step = matchTotp(secret, code.trim(), clock.now().getTime())
    const accepted =
      step !== undefined && (confirm ? await confirmTotp(sql, id, step) : await useTotpStep(sql, id, step))
    if (!accepted) {
      await failed(counters)
      return 'invalid'
    }
    await succeeded(counters)
    return 'ok'
  }

  async function createAccount(realm: string, input: NewAccount, tx?: Queryable): Promise<AccountView> {
    const email = checkEmail(input.email)
    const displayName = input.displayName?.trim() || null
    if (displayName && displayName.length > 200)
      throw invalidField('displayName', 'must be at most 200 characters')
    let passwordHash: string | null = input.passwordHash ?? null
    if (input.password != null) {
      const problems = passwordProblems(input.password, TEAM_PASSWORD_POLICY)
      if (problems.length > 0) throw invalidField('password', `must have ${problems.join(', ')}`)
      passwordHash = await hashPassword(input.password)
    }
    try {
      const row = await insertAccount(tx ?? sql, {
        id: input.id ?? randomUUID(),
        realm,
        email,
        emailNormalized: normalizeEmail(email),
        displayName,
        passwordHash,
      })
      return toView(row)
    } catch (err) {
      if (isUniqueViolation(err, 'accounts_realm_email_unique')) throw accountExists()
      throw err
    }
  }

  async function findAccount(realm: string, email: string, tx?: Queryable): Promise<AccountView | undefined> {
    const normalized = normalizeEmail(email)
    if (!isPlausibleEmail(normalized)) return undefined
    const row = await findAccountByEmail(tx ?? sql, realm, normalized)
    return row ? toView(row) : undefined
  }

  return {
    createTeamAccount(input, tx) {
      return createAccount(TEAM_REALM, input, tx)
    },
    createAccount,
    async get(id) {
      const row = await getAccount(sql, id)
      return row ? toView(row) : undefined
    },
    async getMany(ids) {
      return (await getAccounts(sql, ids)).map(toView)
    },
    findTeamAccount: (email) => findAccount(TEAM_REALM, email),
    findAccount,
    async preparePassword(password, policy) {
      const problems = passwordProblems(password, policy)
      return problems.length > 0 ? { problems } : { hash: await hashPassword(password) }
    },
    async setPassword(id, password, policy = TEAM_PASSWORD_POLICY) {
      const problems = passwordProblems(password, policy)
      if (problems.length > 0) throw invalidField('password', `must have ${problems.join(', ')}`)
      const hash = await hashPassword(password)
      if (!(await setPasswordHash(sql, id, hash)))
        throw new AppError(404, 'account_not_found', 'Account not found')
    },
    async signIn({ realm = TEAM_REALM, email, password, clientIp }) {
      const normalized = normalizeEmail(email)
      // What cannot be an address is not looked up (nor sent to the database), but costs the same.
      const row = isPlausibleEmail(normalized) ? await findAccountByEmail(sql, realm, normalized) : undefined
      return passwordAttempt(throttleSubject(realm, normalized), row, password, clientIp)
    },
    setVerifiedPhone: (id, phone) => setVerifiedPhone(sql, id, phone),
    setSignInEnabled: (id, enabled, tx) => setDisabled(tx ?? sql, id, enabled ? null : clock.now()),
    removeAccount: (id, tx) => deleteAccount(tx ?? sql, id),
    async checkPassword(id, password, clientIp) {
      const row = await getAccount(sql, id)
      return passwordAttempt(
        throttleSubject(row?.realm ?? TEAM_REALM, row?.email_normalized ?? id),
        row,
        password,
        clientIp,
      )
    },
    async beginTotpEnrolment(id, issuer) {
      const row = await getAccount(sql, id)
      if (!row) throw new AppError(404, 'account_not_found', 'Account not found')
      if (row.totp_enrolled_at)
        throw new AppError(409, 'totp_already_enrolled', 'An authenticator is already enrolled')
      // The page shown again (a wrong code, a reload) keeps the secret the person already scanned.
      const pendingKey =
        row.totp_secret_sealed && row.totp_master_key_id ? masterKeys.find(row.totp_master_key_id) : undefined
      const secret = pendingKey ? open(pendingKey.key, row.totp_secret_sealed!, totpAad(id)) : newTotpSecret()
      if (!pendingKey) {
        const primary = masterKeys.primary
        await setTotpSecret(sql, id, seal(primary.key, secret, totpAad(id)), primary.id)
      }
      return { secret: base32Encode(secret), uri: otpauthUri(secret, row.email, issuer) }
    },
    confirmTotpEnrolment: (id, code, clientIp) => totpAttempt(id, code, clientIp, true),
    verifyTotp: (id, code, clientIp) => totpAttempt(id, code, clientIp, false),
    async resetTotp(id) {
      await clearTotp(sql, id)
    },
    sweepThrottle: () =>
      sweepThrottle(sql, new Date(clock.now().getTime() - THROTTLE.windowMs - THROTTLE.lockMs)),
    rewrapSealed: (keyring) =>
      rewrapEach({
        keyring,
        batch: (primaryId, after, limit) => totpSecretsToRewrap(sql, { primaryId, after, limit }),
        aad: (item) => totpAad(item.id),
        replace: (item, resealed, primary) =>
          replaceSealedTotp(sql, { id: item.id, from: item.sealed, to: resealed, masterKeyId: primary.id }),
      }),
  }
}
