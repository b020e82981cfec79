import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Interaction } from 'oidc-provider'
import { type PageContext, renderErrorPage } from '../../../web/layout.ts'
import { type AccountService, TEAM_REALM } from '../../accounts/account-service.ts'
import type { TenantClient } from '../../oidc/oidc-provider.ts'
import type { SignInFederation } from '../sign-in-types.ts'
import { type PasswordPage, renderPasswordPage } from '../views/password-view.ts'
import type { SignInFinish } from './finish.ts'
import { backToStep, type Form, type InteractionKit, realmOf, type ShowStep } from './interaction.ts'

export interface PasswordStepDeps {
  accounts: Pick<AccountService, 'signIn'>
  federation?: Pick<SignInFederation, 'providersFor'> | undefined
  kit: Pick<InteractionKit, 'open' | 'send' | 'csrfFor' | 'formChecked'>
  finishing: Pick<SignInFinish, 'recordSignIn' | 'completeLogin'>
}

/**
 * An application's sign-in page offers its end-users a reset; the console's offers the team's
 * members theirs (`realm=team`, account-link-pages.ts). The partner portal's people have none.
 */
const forgotLinkOf = (app: TenantClient | undefined, interaction: Interaction): string | undefined => {
  const back = `/sign-in/${interaction.uid}`
  if (app)
    return `/forgot-password?${new URLSearchParams({ applicationId: app.applicationId, return: back })}`
  return realmOf(interaction, app) === TEAM_REALM
    ? `/forgot-password?${new URLSearchParams({ realm: TEAM_REALM, return: back })}`
    : undefined
}

export type PasswordStep = ReturnType<typeof passwordStep>

/**
 * The first step: address and password, in the realm of whoever the sign-in is for. A wrong
 * address and a wrong password read the same; the account service bounds the tries.
 */
export function passwordStep(deps: PasswordStepDeps) {
  const { kit } = deps

  function page(
    request: FastifyRequest,
    reply: FastifyReply,
    ctx: PageContext,
    status: number,
    content: Omit<PasswordPage, 'csrf'>,
  ) {
    const csrf = kit.csrfFor(request, reply, `sign-in:${content.uid}`)
    return kit.send(reply, status, renderPasswordPage(ctx, { ...content, csrf }))
  }

  return {
    /** The page of a sign-in nobody has proven anything in yet. */
    show: (async (request, reply, ctx, interaction, client) => {
      return page(request, reply, ctx, 200, {
        uid: interaction.uid,
        email: '',
        forgotLink: forgotLinkOf(client, interaction),
        signUp: client?.signUpEnabled ?? false,
        providers: client
          ? ((await deps.federation?.providersFor(client.tenantId, client.applicationId)) ?? [])
          : [],
      })
    }) satisfies ShowStep,

    routes(app: FastifyInstance) {
      app.post('/sign-in/:uid/password', async (request, reply) => {
        const opened = await kit.open(request, reply)
        if (!opened) return reply
        const { interaction, client, ctx } = opened
        if (!kit.formChecked(request, reply, ctx, 'sign-in', interaction.uid)) return reply
        if (interaction.prompt.name !== 'login') return backToStep(reply, interaction)
        const form = request.body as Form
        const email = form['email'] ?? ''
        const result = await deps.accounts.signIn({
          realm: realmOf(interaction, client),
          email,
          password: form['password'] ?? '',
          clientIp: request.ip,
        })
        if (result.outcome !== 'ok') {
          const reason = result.outcome === 'invalid' ? 'invalid_credentials' : result.outcome
          await deps.finishing.recordSignIn(request, interaction, client, {
            accountId: undefined,
            methods: ['pwd'],
            reason,
          })
        }
        if (result.outcome === 'locked' || result.outcome === 'invalid') {
          // The form again, with the address typed; sign-up and external providers only on the first page.
          const locked = result.outcome === 'locked'
          return page(request, reply, ctx, locked ? 429 : 401, {
            uid: interaction.uid,
            error: locked ? ctx.t.locked : ctx.t.invalidCredentials,
            email,
            forgotLink: forgotLinkOf(client, interaction),
            signUp: false,
            providers: [],
          })
        }
        if (result.outcome === 'blocked') return kit.send(reply, 403, renderErrorPage(ctx, ctx.t.blocked))
        return deps.finishing.completeLogin(request, reply, ctx, interaction, {
          accountId: result.account.id,
          amr: ['pwd'],
          proven: [],
        })
      })
    },
  }
}
