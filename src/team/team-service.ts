import { createHash, randomBytes, randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { MembershipRoles } from '../auth/bearer-authenticator.ts'
import type { Actor } from '../auth/request-context.ts'
import type { TenantRole } from '../auth/roles.ts'
import type { Queryable, Sql, Tx } from '../data/database.ts'
import type { InvalidationBus } from '../data/invalidation-bus.ts'
import { createReadThroughCache } from '../data/read-through-cache.ts'
import type { AccountService } from '../identity/accounts/account-service.ts'
import { checkEmail, normalizeEmail } from '../identity/accounts/account-service.ts'
import { open, seal } from '../keyring/aead.ts'
import type { MasterKeyring } from '../keyring/master-key.ts'
import { type RewrapResult, rewrapEach } from '../keyring/rewrap.ts'
import { MailError, type Mailer } from '../mail/mailer.ts'
import { type Clock, DAY_MS } from '../platform/clock.ts'
import { AppError, forbidden, invalidField, notFound } from '../platform/errors.ts'
import type { MailQueue } from '../platform/module.ts'
import type { TenantService } from '../tenants/tenant-service.ts'
import { invitationEmail, inviterName } from './invitation-email.ts'
import {
  consumeInvitation,
  deleteMembership,
  findInvitationByToken,
  getInvitation,
  getInvitationById,
  getMembership,
  type InvitationRow,
  insertInvitation,
  insertMembership,
  invitationsToRewrap,
  listInvitations,
  listMemberships,
  lockMemberships,
  type MembershipRow,
  membershipsOfAccount,
  overdueInvitations,
  recordDispatch,
  renewInvitation,
  replaceSealedInvitation,
  revokeInvitation,
  updateRole,
} from './team-store.ts'

const MEMBERSHIP_TOPIC = 'membership'
/** How long an invitation link works (decision: a week, as GitHub and Logto do). */
const INVITATION_TTL_MS = 7 * DAY_MS

interface MemberView {
  accountId: string
  email: string
  displayName: string | null
  role: TenantRole
  createdAt: string
}

interface InvitationView {
  invitationId: string
  email: string
  role: TenantRole
  expiresAt: string
  emailDispatchStatus: 'queued' | 'sent' | 'failed'
  /** Why the last send failed (a code such as smtp_refused), when it did. */
  emailDispatchError: string | null
  status: 'pending' | 'accepted' | 'revoked' | 'expired'
  createdAt: string
}

/** Who asks, beyond the audit actor: the caller's own role when a member, for the owner rules. */
export interface TeamCaller {
  memberRole?: TenantRole | undefined
}

export interface InvitationPreview {
  invitationId: string
  tenantId: string
  tenantName: string
  email: string
  role: TenantRole
  accountExists: boolean
}

type DeliveryOutcome = 'sent' | 'failed' | 'skipped'

/**
 * What the team needs of the identity module (src/identity): the console's grants of a member for
 * one tenant. A removal destroys them, so tokens issued before it cannot come back to life when
 * the person is made a member again (the bearer path checks the grant and the role as they are
 * now: with the grant alive, a new membership would give old tokens the new role).
 */
export interface MemberGrants {
  /** Inside the removal's transaction: destroys them (their tokens with them); returns their ids. */
  destroyTenantGrants(tx: Tx, accountId: string, tenantId: string): Promise<string[]>
  /** After commit: every process forgets them (the bus, as for the membership). */
  revoked(grantIds: readonly string[]): Promise<void>
}

/** A signed-in member's own view (`GET /me`): who they are and every tenant they belong to. */
interface MeView {
  accountId: string
  email: string
  displayName: string | null
  /** The tenant the caller's token is for. */
  tenantId: string
  memberships: Array<{ tenantId: string; tenantName: string; role: TenantRole; resource: string }>
}

export interface TeamService extends MembershipRoles {
  /** The memberships of a person (which tenants they may sign in for). */
  tenantsOf(accountId: string): Promise<Array<{ tenantId: string; role: TenantRole }>>
  /** The caller's own account and memberships, for a client to learn which tenants it may ask for. */
  me(tenantId: string, accountId: string): Promise<MeView>
  /** Inside the caller's transaction when given (the bootstrap's): nothing else is read then. */
  addMember(
    actor: Actor,
    input: { accountId: string; role: TenantRole },
    tx?: Tx,
  ): Promise<{ accountId: string; role: TenantRole }>
  listMembers(tenantId: string): Promise<{ data: MemberView[]; total: number }>
  changeRole(actor: Actor, caller: TeamCaller, accountId: string, role: TenantRole): Promise<MemberView>
  removeMember(actor: Actor, caller: TeamCaller, accountId: string): Promise<void>
  invite(
    actor: Actor,
    caller: TeamCaller,
    input: { email: string; role: TenantRole },
  ): Promise<InvitationView>
  listInvitations(tenantId: string): Promise<{ data: InvitationView[]; total: number }>
  resendInvitation(actor: Actor, caller: TeamCaller, id: string): Promise<InvitationView>
  revokeInvitation(actor: Actor, id: string): Promise<InvitationView>
  /** The invitation a link's token opens, if it is still live. */
  previewInvitation(token: string): Promise<InvitationPreview | undefined>
  /** Consumes the invitation and adds the membership in one transaction (`invitation_invalid`, 400, otherwise). */
  acceptInvitation(
    token: string,
    accountId: string,
    context: { requestId: string | null; clientIp: string | null },
  ): Promise<InvitationPreview>
  /** One send of an invitation's e-mail (job process). `final`: no retry follows a failure. */
  deliverInvitation(
    job: { invitationId: string; sendCount: number },
    final: boolean,
  ): Promise<DeliveryOutcome>
  /** Queued sends whose job was lost, to enqueue again. */
  overdueInvitations(graceMs: number): Promise<Array<{ invitationId: string; sendCount: number }>>
  /** Master key rotation: invitation links waiting for their e-mail are sealed again under the primary key. */
  rewrapSealed(keyring: MasterKeyring): Promise<RewrapResult>
}

const lastOwner = () =>
  new AppError(409, 'last_owner', 'A tenant always has at least one owner: make another member owner first')
const invitationInvalid = () =>
  new AppError(400, 'invitation_invalid', 'The invitation is not valid: it expired, was used or was revoked')

const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest()
const linkAad = (id: string) => `kms invitation link v1 id:${id}`
const TOKEN = /^[A-Za-z0-9_-]{43}$/
const MEMBER_ACTOR = /^member:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/

/** An invitation's e-mail on the mail queue (team-jobs.ts delivers it): one job per send. */
export const INVITATION_EMAIL = 'invitation-email'
export interface InvitationSend {
  invitationId: string
  sendCount: number
}
/** A send is identified by (invitation, send count), so it runs once, re-queued or not. */
export const invitationEmailId = (send: InvitationSend) => `${send.invitationId}.${send.sendCount}`

export function createTeamService(deps: {
  sql: Sql
  audit: AuditLog
  accounts: AccountService
  tenants: Pick<TenantService, 'get'>
  masterKeys: MasterKeyring
  bus: InvalidationBus
  clock: Clock
  /** Absent in processes that only deliver (the job process has the mailer). */
  mailQueue?: MailQueue
  mailer?: Mailer
  /** The base of invitation links: the provider's issuer (ID_URL). */
  linkBase: () => string
  cacheTtlMs: number
  /** Absent only where no member is ever removed (the first start's bootstrap). */
  grants?: MemberGrants
}): TeamService {
  const { sql, audit, clock } = deps
  const roles = createReadThroughCache<TenantRole | null>({ ttlMs: deps.cacheTtlMs, maxEntries: 50_000 })
  deps.bus.subscribe(MEMBERSHIP_TOPIC, (key) => roles.dropGroup(key))
  deps.bus.onResync(() => roles.clear())
  const changed = (tenantId: string, accountId: string) =>
    deps.bus.publish(MEMBERSHIP_TOPIC, `${tenantId}:${accountId}`)

  async function memberViews(rows: MembershipRow[]): Promise<MemberView[]> {
    const accounts = new Map(
      (await deps.accounts.getMany(rows.map((row) => row.account_id))).map((a) => [a.id, a]),
    )
    return rows.map((row) => ({
      accountId: row.account_id,
      email: accounts.get(row.account_id)?.email ?? '',
      displayName: accounts.get(row.account_id)?.displayName ?? null,
      role: row.role,
      createdAt: row.created_at.toISOString(),
    }))
  }

  const invitationView = (row: InvitationRow): InvitationView => ({
    invitationId: row.id,
    email: row.email,
    role: row.role,
    expiresAt: row.expires_at.toISOString(),
    emailDispatchStatus: row.email_dispatch_status,
    emailDispatchError: row.dispatch_error,
    status: row.consumed_at
      ? 'accepted'
      : row.revoked_at
        ? 'revoked'
        : row.expires_at.getTime() <= clock.now().getTime()
          ? 'expired'
          : 'pending',
    createdAt: row.created_at.toISOString(),
  })

  const requireOwnerFor = (caller: TeamCaller, ...roles: Array<TenantRole | undefined>) => {
    if (roles.includes('tenant:owner') && caller.memberRole !== 'tenant:owner')
      throw forbidden(['tenant:owner'])
  }

  /** A new link: the token for the e-mail (sealed until sent), its hash for lookup. */
  function newLink(id: string) {
    const token = randomBytes(32).toString('base64url')
    const link = `${deps.linkBase()}/invitations/accept?token=${token}`
    const primary = deps.masterKeys.primary
    return {
      tokenHash: hashToken(token),
      tokenSealed: seal(primary.key, Buffer.from(link, 'utf8'), linkAad(id)),
      tokenMasterKeyId: primary.id,
    }
  }

  async function enqueue(row: InvitationRow): Promise<void> {
    // After commit. A failure here leaves the row queued; the job process's sweep sends it.
    const send = { invitationId: row.id, sendCount: row.send_count }
    await deps.mailQueue?.enqueue(INVITATION_EMAIL, send, invitationEmailId(send)).catch(() => {})
  }

  async function preview(row: InvitationRow): Promise<InvitationPreview> {
    const tenant = await deps.tenants.get(row.tenant_id)
    return {
      invitationId: row.id,
      tenantId: row.tenant_id,
      tenantName: tenant?.name ?? '',
      email: row.email,
      role: row.role,
      accountExists: (await deps.accounts.findTeamAccount(row.email)) !== undefined,
    }
  }

  /** The member who made an invitation (`member:<account id>`), as the e-mail names them. */
  async function inviterOf(createdBy: string) {
    const accountId = MEMBER_ACTOR.exec(createdBy)?.[1]
    return accountId ? deps.accounts.get(accountId) : undefined
  }

  async function insertMember(
    db: Queryable,
    actor: Actor,
    accountId: string,
    role: TenantRole,
  ): Promise<MembershipRow> {
    const row = await insertMembership(db, {
      tenantId: actor.tenantId,
      accountId,
      role,
      createdBy: actor.actor,
    })
    if (!row) throw new AppError(409, 'already_member', 'The account is already a member of this tenant')
    await audit.recordInTransaction(db, {
      ...actor,
      action: 'team.member.add',
      resource: `member:${accountId}`,
      outcome: 'success',
      details: { role },
    })
    return row
  }

  return {
    async roleOf(tenantId, accountId) {
      const role = await roles.get(
        `${tenantId}:${accountId}`,
        '',
        async () => (await getMembership(sql, tenantId, accountId))?.role ?? null,
      )
      return role ?? undefined
    },
    async tenantsOf(accountId) {
      return (await membershipsOfAccount(sql, accountId)).map((row) => ({
        tenantId: row.tenant_id,
        role: row.role,
      }))
    },
    async me(tenantId, accountId) {
      const [account, rows] = await Promise.all([
        deps.accounts.get(accountId),
        membershipsOfAccount(sql, accountId),
      ])
      if (!account) throw notFound('account_not_found', 'Account')
      const memberships = await Promise.all(
        rows.map(async (row) => ({ row, tenant: await deps.tenants.get(row.tenant_id) })),
      )
      return {
        accountId,
        email: account.email,
        displayName: account.displayName,
        tenantId,
        memberships: memberships.flatMap(({ row, tenant }) =>
          tenant
            ? [
                {
                  tenantId: row.tenant_id,
                  tenantName: tenant.name,
                  role: row.role,
                  resource: `urn:kms:tenant:${row.tenant_id}`,
                },
              ]
            : [],
        ),
      }
    },
    async addMember(actor, input, tx) {
      const row = tx
        ? await insertMember(tx, actor, input.accountId, input.role)
        : await sql.begin((t) => insertMember(t, actor, input.accountId, input.role))
      if (!tx) await changed(actor.tenantId, input.accountId)
      return { accountId: row.account_id, role: row.role }
    },
    async listMembers(tenantId) {
      const data = await memberViews(await listMemberships(sql, tenantId))
      return { data, total: data.length }
    },
    async changeRole(actor, caller, accountId, role) {
      const row = await sql.begin(async (tx) => {
        const rows = await lockMemberships(tx, actor.tenantId)
        const target = rows.find((r) => r.account_id === accountId)
        if (!target) throw notFound('member_not_found', 'Member')
        requireOwnerFor(caller, target.role, role)
        if (
          target.role === 'tenant:owner' &&
          role !== 'tenant:owner' &&
          rows.filter((r) => r.role === 'tenant:owner').length === 1
        )
          throw lastOwner()
        const updated = await updateRole(tx, actor.tenantId, accountId, role)
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'team.member.role_change',
          resource: `member:${accountId}`,
          outcome: 'success',
          details: { from: target.role, to: role },
        })
        return updated!
      })
      await changed(actor.tenantId, accountId)
      return (await memberViews([row]))[0]!
    },
    async removeMember(actor, caller, accountId) {
      const endedGrants = await sql.begin(async (tx) => {
        const rows = await lockMemberships(tx, actor.tenantId)
        const target = rows.find((r) => r.account_id === accountId)
        if (!target) throw notFound('member_not_found', 'Member')
        requireOwnerFor(caller, target.role)
        if (target.role === 'tenant:owner' && rows.filter((r) => r.role === 'tenant:owner').length === 1)
          throw lastOwner()
        await deleteMembership(tx, actor.tenantId, accountId)
        // In the same transaction: a removal that commits never leaves grants behind for a later
        // membership to revive.
        const ended = (await deps.grants?.destroyTenantGrants(tx, accountId, actor.tenantId)) ?? []
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'team.member.remove',
          resource: `member:${accountId}`,
          outcome: 'success',
          details: { role: target.role, grantsEnded: ended.length },
        })
        return ended
      })
      // Every process drops the cached role and grants at once: the member's tokens stop working.
      await changed(actor.tenantId, accountId)
      await deps.grants?.revoked(endedGrants)
    },
    async invite(actor, caller, input) {
      const email = checkEmail(input.email, 'body/email')
      requireOwnerFor(caller, input.role)
      const existing = await deps.accounts.findTeamAccount(email)
      if (existing && (await getMembership(sql, actor.tenantId, existing.id))) {
        throw new AppError(409, 'already_member', 'This address belongs to a member of the tenant already')
      }
      const id = randomUUID()
      const row = await sql.begin(async (tx) => {
        const created = await insertInvitation(tx, {
          id,
          tenantId: actor.tenantId,
          email,
          emailNormalized: normalizeEmail(email),
          role: input.role,
          ...newLink(id),
          createdBy: actor.actor,
          expiresAt: new Date(clock.now().getTime() + INVITATION_TTL_MS),
        })
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'team.invitation.create',
          resource: `invitation:${id}`,
          outcome: 'success',
          details: { role: input.role },
        })
        return created
      })
      await enqueue(row)
      return invitationView(row)
    },
    async listInvitations(tenantId) {
      const data = (await listInvitations(sql, tenantId)).map(invitationView)
      return { data, total: data.length }
    },
    async resendInvitation(actor, caller, id) {
      const current = await getInvitation(sql, actor.tenantId, id)
      if (!current) throw notFound('invitation_not_found', 'Invitation')
      requireOwnerFor(caller, current.role)
      const row = await sql.begin(async (tx) => {
        const renewed = await renewInvitation(tx, {
          tenantId: actor.tenantId,
          id,
          ...newLink(id),
          expiresAt: new Date(clock.now().getTime() + INVITATION_TTL_MS),
        })
        if (!renewed)
          throw new AppError(409, 'invitation_closed', 'The invitation was already accepted or revoked')
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'team.invitation.resend',
          resource: `invitation:${id}`,
          outcome: 'success',
        })
        return renewed
      })
      await enqueue(row)
      return invitationView(row)
    },
    async revokeInvitation(actor, id) {
      return sql.begin(async (tx) => {
        // An owner's invitation is an owner's to take back, as only an owner may send one
        // (requireOwnerFor): the caller's role as it is now; an API key holds none.
        const pending = await getInvitation(tx, actor.tenantId, id)
        if (pending?.role === 'tenant:owner') {
          const accountId = actor.actor.startsWith('member:')
            ? actor.actor.slice('member:'.length)
            : undefined
          const membership = accountId ? await getMembership(tx, actor.tenantId, accountId) : undefined
          requireOwnerFor({ memberRole: membership?.role }, pending.role)
        }
        const row = await revokeInvitation(tx, actor.tenantId, id)
        if (!row) {
          if (await getInvitation(tx, actor.tenantId, id))
            throw new AppError(409, 'invitation_closed', 'The invitation was already accepted or revoked')
          throw notFound('invitation_not_found', 'Invitation')
        }
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'team.invitation.revoke',
          resource: `invitation:${id}`,
          outcome: 'success',
        })
        return invitationView(row)
      })
    },
    async previewInvitation(token) {
      if (!TOKEN.test(token)) return undefined
      const row = await findInvitationByToken(sql, hashToken(token))
      return row ? preview(row) : undefined
    },
    async acceptInvitation(token, accountId, context) {
      if (!TOKEN.test(token)) throw invitationInvalid()
      const account = await deps.accounts.get(accountId)
      const row = await sql.begin(async (tx) => {
        const consumed = await consumeInvitation(tx, hashToken(token), accountId)
        if (!consumed) throw invitationInvalid()
        if (!account || normalizeEmail(account.email) !== consumed.email_normalized) {
          throw invalidField('email', 'must be the invited address')
        }
        const actor: Actor = { tenantId: consumed.tenant_id, actor: `member:${accountId}`, ...context }
        const existing = await getMembership(tx, consumed.tenant_id, accountId)
        if (!existing) await insertMember(tx, actor, accountId, consumed.role)
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'team.invitation.accept',
          resource: `invitation:${consumed.id}`,
          outcome: 'success',
          details: { role: consumed.role, alreadyMember: existing !== undefined },
        })
        return consumed
      })
      await changed(row.tenant_id, accountId)
      return preview(row)
    },
    async deliverInvitation(job, final) {
      const row = await getInvitationById(sql, job.invitationId)
      if (
        !row ||
        row.send_count !== job.sendCount ||
        row.email_dispatch_status !== 'queued' ||
        !row.token_sealed ||
        !row.token_master_key_id
      )
        return 'skipped'
      if (row.revoked_at || row.consumed_at) return 'skipped'
      const masterKey = deps.masterKeys.find(row.token_master_key_id)
      if (!masterKey) return 'skipped'
      const link = open(masterKey.key, row.token_sealed, linkAad(row.id)).toString('utf8')
      const tenant = await deps.tenants.get(row.tenant_id)
      const inviter = await inviterOf(row.created_by)
      try {
        if (!deps.mailer) throw new MailError('smtp_not_configured')
        await deps.mailer.send({
          to: row.email,
          ...invitationEmail({
            tenantName: tenant?.name ?? '',
            role: row.role,
            link,
            expiresAt: row.expires_at,
            inviter: inviter ? inviterName(inviter) : null,
          }),
        })
      } catch (err) {
        const reason = err instanceof MailError ? err.reason : 'smtp_failed'
        if (!final && reason !== 'smtp_not_configured') throw err
        await sql.begin(async (tx) => {
          const failed = await recordDispatch(tx, {
            id: row.id,
            sendCount: row.send_count,
            status: 'failed',
            error: reason,
          })
          if (!failed) return
          await audit.recordInTransaction(tx, {
            tenantId: row.tenant_id,
            actor: 'system:mail',
            action: 'team.invitation.email_failed',
            resource: `invitation:${row.id}`,
            outcome: 'failure',
            details: { reason },
          })
        })
        return 'failed'
      }
      await recordDispatch(sql, { id: row.id, sendCount: row.send_count, status: 'sent', error: null })
      return 'sent'
    },
    async overdueInvitations(graceMs) {
      const rows = await overdueInvitations(sql, new Date(clock.now().getTime() - graceMs))
      return rows.map((row) => ({ invitationId: row.id, sendCount: row.send_count }))
    },
    rewrapSealed: (keyring) =>
      rewrapEach({
        keyring,
        batch: (primaryId, after, limit) => invitationsToRewrap(sql, { primaryId, after, limit }),
        aad: (item) => linkAad(item.id),
        replace: (item, resealed, primary) =>
          replaceSealedInvitation(sql, {
            id: item.id,
            from: item.sealed,
            to: resealed,
            masterKeyId: primary.id,
          }),
      }),
  }
}
