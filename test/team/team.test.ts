import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type AuditView, startTestService, type TestService, waitFor } from '../helpers/service.ts'
import {
  type ConsoleClient,
  CookieJar,
  consoleClient,
  csrfOf,
  memberSession,
  page,
  signIn,
} from '../helpers/sign-in.ts'
import { startSmtp, type TestSmtp, textOf } from '../helpers/smtp.ts'

const REDIRECT = 'http://127.0.0.1:9/callback'

async function auditOf(service: TestService, key: string, action: string): Promise<AuditView[]> {
  const result = await service.request('GET', `/api/v1/audit?action=${encodeURIComponent(action)}`, { key })
  assert.equal(result.status, 200, result.text)
  return result.body.data as AuditView[]
}

const linkOf = (text: string): string => {
  const match = /(http:\/\/[^\s"<>]+\/invitations\/accept\?token=[A-Za-z0-9_-]+)/.exec(text)
  assert.ok(match, `a link in the e-mail:\n${text}`)
  return match[1]!
}

describe('team: invitations, members, roles', () => {
  let smtp: TestSmtp
  let service: TestService
  let client: ConsoleClient

  before(async () => {
    smtp = await startSmtp('accept')
    service = await startTestService(
      {
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_SMTP_TIMEOUT_MS: '2000',
        KMS_CONSOLE_REDIRECT_URIS: REDIRECT,
        KMS_JOB_SWEEP_MS: '200',
      },
      { jobs: true },
    )
    client = await consoleClient(service.baseUrl, REDIRECT)
  })
  after(async () => {
    await service.stop()
    await smtp.stop()
  })

  test('an invitation is 201 queued at once, e-mailed, accepted through the page, and the invitee becomes a member with the role', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const invited = await service.request('POST', '/api/v1/team/invitations', {
      headers: owner.headers,
      body: { email: 'Grace@Example.com', role: 'tenant:developer' },
    })
    assert.equal(invited.status, 201, invited.text)
    assert.equal(invited.body.emailDispatchStatus, 'queued')
    assert.equal(invited.body.email, 'Grace@Example.com')
    assert.equal(invited.body.role, 'tenant:developer')
    assert.ok(Date.parse(invited.body.expiresAt) > Date.now())
    assert.ok(invited.body.invitationId)

    await waitFor(
      () => smtp.messages.some((m) => m.to.some((to) => to.toLowerCase() === 'grace@example.com')),
      'the invitation e-mail',
    )
    const mail = smtp.messages.find((m) => m.to.some((to) => to.toLowerCase() === 'grace@example.com'))!
    const link = linkOf(textOf(mail))
    await waitFor(async () => {
      const list = await service.request('GET', '/api/v1/team/invitations', { headers: owner.headers })
      return (
        list.body.data.find((i: { invitationId: string }) => i.invitationId === invited.body.invitationId)
          ?.emailDispatchStatus === 'sent'
      )
    }, 'status sent')

    // The page: set a password, become a member.
    const jar = new CookieJar()
    const shown = await page(jar, link)
    assert.equal(shown.status, 200)
    assert.match(shown.html, /tenant:developer|developer/)
    const token = new URL(link).searchParams.get('token')!
    const done = await page(jar, new URL('/invitations/accept', service.baseUrl), {
      form: { csrf: csrfOf(shown.html), token, password: 'grace-password-long' },
    })
    assert.equal(done.status, 200, done.html)
    const members = await service.request('GET', '/api/v1/team/members', { headers: owner.headers })
    const grace = members.body.data.find((m: { email: string }) => m.email === 'Grace@Example.com')
    assert.equal(grace?.role, 'tenant:developer')

    // Single use: the link is dead now.
    assert.equal((await page(new CookieJar(), link)).status, 400)
    // The new member signs in for the tenant.
    const { tokens } = await signIn(service.baseUrl, client, {
      email: 'grace@example.com',
      password: 'grace-password-long',
      resource: `urn:kms:tenant:${tenant.tenantId}`,
      tokenResource: true,
    })
    const me = await service.request('GET', '/api/v1/tenant', {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    })
    assert.equal(me.body.role, 'tenant:developer')
    const accepted = await auditOf(service, tenant.key, 'team.invitation.accept')
    assert.equal(accepted.length, 1)
    assert.equal(accepted[0]!.actor, `member:${grace.accountId}`)
  })

  test('GET /me: a member’s token for one tenant lists every tenant they belong to; API keys get 403', async () => {
    const first = await service.createTenant()
    const second = await service.createTenant()
    const member = await memberSession(service, client, first.tenantId, 'tenant:developer')
    await service.api.services.team.addMember(
      { tenantId: second.tenantId, actor: 'test', requestId: null, clientIp: null },
      { accountId: member.accountId, role: 'tenant:viewer' },
    )
    const me = await service.request('GET', '/api/v1/me', { headers: member.headers })
    assert.equal(me.status, 200, me.text)
    assert.equal(me.body.accountId, member.accountId)
    assert.equal(me.body.email, member.email)
    assert.equal(me.body.tenantId, first.tenantId)
    const byTenant = new Map(
      (
        me.body.memberships as Array<{ tenantId: string; role: string; resource: string; tenantName: string }>
      ).map((m) => [m.tenantId, m]),
    )
    assert.equal(byTenant.size, 2)
    assert.equal(byTenant.get(first.tenantId)?.role, 'tenant:developer')
    assert.equal(byTenant.get(second.tenantId)?.role, 'tenant:viewer')
    assert.equal(byTenant.get(second.tenantId)?.resource, `urn:kms:tenant:${second.tenantId}`)
    assert.match(byTenant.get(second.tenantId)?.tenantName ?? '', /^tenant-/)
    const byKey = await service.request('GET', '/api/v1/me', { key: first.key })
    assert.equal(byKey.status, 403, byKey.text)
    assert.equal((await service.request('GET', '/api/v1/me')).status, 401)
  })

  test('API keys with every scope, viewers and developers cannot manage the team; admins cannot grant owner', async () => {
    const tenant = await service.createTenant()
    const body = { email: 'x@example.com', role: 'tenant:viewer' }
    const byKey = await service.request('POST', '/api/v1/team/invitations', { key: tenant.key, body })
    assert.equal(byKey.status, 403)
    assert.equal(byKey.body.error, 'forbidden')
    for (const role of ['tenant:viewer', 'tenant:developer'] as const) {
      const member = await memberSession(service, client, tenant.tenantId, role)
      const refused = await service.request('POST', '/api/v1/team/invitations', {
        headers: member.headers,
        body,
      })
      assert.equal(refused.status, 403, role)
      assert.equal(refused.body.error, 'forbidden')
      assert.equal(
        (await service.request('GET', '/api/v1/team/members', { headers: member.headers })).status,
        200,
        `${role} reads the team`,
      )
    }
    const admin = await memberSession(service, client, tenant.tenantId, 'tenant:admin')
    const ownerInvite = await service.request('POST', '/api/v1/team/invitations', {
      headers: admin.headers,
      body: { email: 'boss@example.com', role: 'tenant:owner' },
    })
    assert.equal(ownerInvite.status, 403)
    assert.equal(ownerInvite.body.error, 'forbidden')
  })

  test('at least one owner: the last owner can be neither demoted nor removed; roles change and members leave', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const dev = await memberSession(service, client, tenant.tenantId, 'tenant:developer')
    const demote = await service.request('PATCH', `/api/v1/team/members/${owner.accountId}`, {
      headers: owner.headers,
      body: { role: 'tenant:admin' },
    })
    assert.equal(demote.status, 409)
    assert.equal(demote.body.error, 'last_owner')
    const remove = await service.request('DELETE', `/api/v1/team/members/${owner.accountId}`, {
      headers: owner.headers,
    })
    assert.equal(remove.status, 409)

    const promoted = await service.request('PATCH', `/api/v1/team/members/${dev.accountId}`, {
      headers: owner.headers,
      body: { role: 'tenant:owner' },
    })
    assert.equal(promoted.status, 200, promoted.text)
    // Two owners now: the first may step down.
    const stepDown = await service.request('PATCH', `/api/v1/team/members/${owner.accountId}`, {
      headers: owner.headers,
      body: { role: 'tenant:viewer' },
    })
    assert.equal(stepDown.status, 200)
    // The role applies to the same token at once: a viewer cannot invite.
    const asViewer = await service.request('POST', '/api/v1/team/invitations', {
      headers: owner.headers,
      body: { email: 'y@example.com', role: 'tenant:viewer' },
    })
    assert.equal(asViewer.status, 403)
    const removed = await service.request('DELETE', `/api/v1/team/members/${owner.accountId}`, {
      headers: dev.headers,
    })
    assert.equal(removed.status, 204)
    assert.equal((await service.request('GET', '/api/v1/tenant', { headers: owner.headers })).status, 401)
    assert.equal(
      (await service.request('DELETE', `/api/v1/team/members/${owner.accountId}`, { headers: dev.headers }))
        .status,
      404,
    )
    const changes = await auditOf(service, tenant.key, 'team.member.role_change')
    assert.equal(changes.length, 2)
  })

  test('resend makes a new link and kills the old one; revoke and expiry kill it; a refusing SMTP server leaves failed and an audit record', async () => {
    const tenant = await service.createTenant()
    const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
    const invited = await service.request('POST', '/api/v1/team/invitations', {
      headers: owner.headers,
      body: { email: 'ren@example.com', role: 'tenant:viewer' },
    })
    await waitFor(
      () => smtp.messages.filter((m) => m.to.includes('ren@example.com')).length === 1,
      'first e-mail',
    )
    const first = linkOf(textOf(smtp.messages.find((m) => m.to.includes('ren@example.com'))!))
    const resent = await service.request(
      'POST',
      `/api/v1/team/invitations/${invited.body.invitationId}/resend`,
      { headers: owner.headers },
    )
    assert.equal(resent.status, 200, resent.text)
    assert.equal(resent.body.emailDispatchStatus, 'queued')
    await waitFor(
      () => smtp.messages.filter((m) => m.to.includes('ren@example.com')).length === 2,
      'second e-mail',
    )
    const second = linkOf(textOf(smtp.messages.filter((m) => m.to.includes('ren@example.com'))[1]!))
    assert.notEqual(first, second)
    assert.equal((await page(new CookieJar(), first)).status, 400)
    assert.equal((await page(new CookieJar(), second)).status, 200)
    const revoked = await service.request('DELETE', `/api/v1/team/invitations/${invited.body.invitationId}`, {
      headers: owner.headers,
    })
    assert.equal(revoked.status, 200)
    assert.equal(revoked.body.status, 'revoked')
    assert.equal((await page(new CookieJar(), second)).status, 400)

    // An invitation past its expiry: the link is dead and the list says expired.
    const late = await service.request('POST', '/api/v1/team/invitations', {
      headers: owner.headers,
      body: { email: 'late@example.com', role: 'tenant:viewer' },
    })
    await waitFor(
      () => smtp.messages.some((m) => m.to.includes('late@example.com')),
      'the e-mail of the late invitation',
    )
    const lateLink = linkOf(textOf(smtp.messages.find((m) => m.to.includes('late@example.com'))!))
    assert.equal((await page(new CookieJar(), lateLink)).status, 200)
    await service.sql`UPDATE team_invitations SET expires_at = now() - interval '1 second' WHERE id = ${late.body.invitationId}`
    assert.equal((await page(new CookieJar(), lateLink)).status, 400)
    const listed = await service.request('GET', '/api/v1/team/invitations', { headers: owner.headers })
    assert.equal(
      listed.body.data.find((i: { invitationId: string }) => i.invitationId === late.body.invitationId)
        .status,
      'expired',
    )

    smtp.mode = 'refuse'
    try {
      const refused = await service.request('POST', '/api/v1/team/invitations', {
        headers: owner.headers,
        body: { email: 'bounce@example.com', role: 'tenant:viewer' },
      })
      assert.equal(refused.status, 201)
      await waitFor(async () => {
        const list = await service.request('GET', '/api/v1/team/invitations', { headers: owner.headers })
        return (
          list.body.data.find((i: { invitationId: string }) => i.invitationId === refused.body.invitationId)
            ?.emailDispatchStatus === 'failed'
        )
      }, 'status failed')
      const list = await service.request('GET', '/api/v1/team/invitations', { headers: owner.headers })
      assert.equal(
        list.body.data.find((i: { invitationId: string }) => i.invitationId === refused.body.invitationId)
          .emailDispatchError,
        'smtp_refused',
      )
      const failures = await auditOf(service, tenant.key, 'team.invitation.email_failed')
      assert.equal(failures.length, 1)
      assert.equal(failures[0]!.outcome, 'failure')
      assert.equal(failures[0]!.resource, `invitation:${refused.body.invitationId}`)
      assert.equal(failures[0]!.details?.['reason'], 'smtp_refused')
    } finally {
      smtp.mode = 'accept'
    }
  })
})

describe('team: an SMTP server that never answers', () => {
  test('the API answers 201 queued while the job is still connected to the silent server; the send ends failed (smtp_timeout) and audited', async () => {
    const smtp = await startSmtp('hang')
    const service = await startTestService(
      {
        KMS_SMTP_URL: smtp.url,
        KMS_SMTP_ATTEMPTS: '1',
        KMS_SMTP_TIMEOUT_MS: '1500',
        KMS_CONSOLE_REDIRECT_URIS: REDIRECT,
      },
      { jobs: true },
    )
    try {
      const client = await consoleClient(service.baseUrl, REDIRECT)
      const tenant = await service.createTenant()
      const owner = await memberSession(service, client, tenant.tenantId, 'tenant:owner')
      const invited = await service.request('POST', '/api/v1/team/invitations', {
        headers: owner.headers,
        body: { email: 'slow@example.com', role: 'tenant:viewer' },
      })
      assert.equal(invited.status, 201)
      assert.equal(invited.body.emailDispatchStatus, 'queued')
      // The job reaches the server, which says nothing: the answer above did not wait for it.
      await waitFor(() => smtp.connections >= 1, 'the job connecting to the SMTP server')
      const status = async () =>
        (await service.request('GET', '/api/v1/team/invitations', { headers: owner.headers })).body.data[0]
          .emailDispatchStatus as string
      await waitFor(async () => (await status()) === 'failed', 'the send to time out')
      const list = await service.request('GET', '/api/v1/team/invitations', { headers: owner.headers })
      assert.equal(list.body.data[0].emailDispatchError, 'smtp_timeout')
      assert.equal((await auditOf(service, tenant.key, 'team.invitation.email_failed')).length, 1)
    } finally {
      await service.stop()
      await smtp.stop()
    }
  })
})
