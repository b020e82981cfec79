import type { FastifyInstance } from 'fastify'
import { isUuid } from '../platform/ids.ts'
import { installFormHandling } from '../web/form-surface.ts'
import {
  esc,
  type PageSettings,
  pageContext,
  pageHeaders,
  renderErrorPage,
  renderPage,
} from '../web/layout.ts'
import { FederationError, type FederationService, SAML_LIMITS } from './saml-service.ts'

const MAX_FIELDS = 10

/**
 * The SAML service provider's endpoints, beside the sign-in pages: the metadata an IdP imports,
 * and the assertion consumer service (HTTP-POST binding). The ACS is posted to from the IdP's
 * origin, so the browser sends no SameSite=Lax cookie with it: it checks the response, records
 * the account on the request, and sends the browser back to the sign-in page that asked, where
 * the interaction cookie is present again (docs/identity.md "SAML federation").
 */
export function samlSurface(deps: { federation: FederationService; pageSettings: PageSettings }) {
  return async (app: FastifyInstance) => {
    app.addHook('onRoute', (route) => {
      route.schema = { ...(route.schema ?? {}), hide: true }
    })
    const page = installFormHandling(app, {
      pageSettings: deps.pageSettings,
      bodyLimit: SAML_LIMITS.responseChars + 4096,
      maxFields: MAX_FIELDS,
      failure: 'SAML endpoint failed',
      tooLarge: 'The SAML response is too large.',
      notAForm: 'The SAML response must be posted as a form.',
    })

    app.get('/saml/:idpId/metadata', async (request, reply) => {
      const { idpId } = request.params as { idpId: string }
      const xml = isUuid(idpId) ? await deps.federation.metadata(idpId) : undefined
      if (!xml) return page(request, reply, 404, 'This page does not exist.')
      return reply.header('content-type', 'application/samlmetadata+xml; charset=utf-8').send(xml)
    })

    app.post('/saml/:idpId/acs', async (request, reply) => {
      const { idpId } = request.params as { idpId: string }
      const ctx = pageContext(undefined, request.headers['accept-language'])
      const form = (request.body ?? {}) as Record<string, string>
      const response = form['SAMLResponse']
      if (!isUuid(idpId)) return page(request, reply, 404, 'This page does not exist.')
      if (!response || response.length > SAML_LIMITS.responseChars)
        return page(request, reply, 400, 'The form carries no SAML response.')
      try {
        const { requestId, interactionUid } = await deps.federation.acceptResponse(idpId, {
          SAMLResponse: response,
          clientIp: request.ip,
        })
        const next = `/sign-in/${interactionUid}/federated-return/${requestId}`
        const body = `<p>${esc(ctx.t.continuing)}</p><p><a class="link" href="${esc(next)}">${esc(ctx.t.continue)}</a></p>`
        return reply
          .code(200)
          .headers(pageHeaders(deps.pageSettings))
          .send(renderPage(ctx, { title: ctx.t.signInTitle, body, refreshTo: next }))
      } catch (err) {
        if (!(err instanceof FederationError)) throw err
        // The person's address is an account with its own password or factor: say so, and lead
        // back to the sign-in that asked, where they can use it (the response itself is spent).
        if (err.reason === 'account_has_credentials')
          return reply
            .code(400)
            .headers(pageHeaders(deps.pageSettings))
            .send(
              renderErrorPage(
                ctx,
                ctx.t.federationAccountExists,
                err.interactionUid ? `/sign-in/${err.interactionUid}` : undefined,
              ),
            )
        return page(request, reply, 400, ctx.t.federationFailed)
      }
    })
    app.all('/saml/*', async (request, reply) => page(request, reply, 404, 'This page does not exist.'))
  }
}
