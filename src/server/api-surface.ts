import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { accessPolicyRoutes } from '../access-policies/access-policy-routes.ts'
import { apiKeyRoutes } from '../api-keys/api-key-routes.ts'
import { applicationRoutes } from '../applications/application-routes.ts'
import { auditRoutes } from '../audit/audit-routes.ts'
import { access } from '../auth/access.ts'
import { registerAuthentication } from '../auth/auth-hook.ts'
import { billingRoutes } from '../billing/billing-routes.ts'
import { cloudExportRoutes } from '../cloud-export/cloud-export-routes.ts'
import { batchRoutes } from '../crypto/batch-routes.ts'
import { cryptoRoutes } from '../crypto/crypto-routes.ts'
import { dataKeyRoutes } from '../crypto/data-key-routes.ts'
import { signingRoutes } from '../crypto/signing-routes.ts'
import { endUserRoutes } from '../endusers/enduser-routes.ts'
import { samlRoutes } from '../federation/saml-routes.ts'
import { healthRoutes } from '../health/health-routes.ts'
import { installErrorHandlers } from '../http/error-handler.ts'
import { intelligenceRoutes } from '../intelligence/intelligence-routes.ts'
import { keyRoutes } from '../keys/key-routes.ts'
import { partnerRoutes } from '../partners/partner-routes.ts'
import { roleRoutes } from '../roles/role-routes.ts'
import { rotationRoutes } from '../rotation/rotation-routes.ts'
import { folderRoutes } from '../secrets/folder-routes.ts'
import { secretRoutes } from '../secrets/secret-routes.ts'
import { settingsRoutes } from '../settings/settings-routes.ts'
import { signupRoutes } from '../signup/signup-routes.ts'
import { teamRoutes } from '../team/team-routes.ts'
import { tenantRoutes } from '../tenants/tenant-routes.ts'
import { webhookRoutes } from '../webhooks/webhook-routes.ts'
import type { AppDeps } from './http.ts'

/**
 * The JSON API under /api/v1, a surface of its own: JSON errors `{error, message}`, JSON and
 * octet-stream bodies only, and callers authenticated by `X-Api-Key` or, for team members,
 * `Authorization: Bearer`, against what each route declares (auth/access.ts). Its 404s are
 * answered after authentication, so strangers cannot probe which routes exist.
 */
export function apiSurface(deps: AppDeps, openApiDocument: () => unknown): FastifyPluginAsyncTypebox {
  return async (api) => {
    installErrorHandlers(api)
    registerAuthentication(api, {
      authenticator: deps.authenticator,
      audit: deps.audit,
      ...(deps.bearer ? { bearer: deps.bearer } : {}),
      partners: deps.partnerCredentials,
    })
    await api.register(healthRoutes(deps))
    await api.register(tenantRoutes(deps.tenants))
    await api.register(apiKeyRoutes(deps.apiKeys, deps.audit))
    await api.register(auditRoutes(deps.sql))
    await api.register(keyRoutes(deps.keys))
    await api.register(rotationRoutes(deps.rotation))
    await api.register(cloudExportRoutes(deps.cloudExports))
    await api.register(intelligenceRoutes(deps.intelligence))
    await api.register(webhookRoutes(deps.webhooks))
    await api.register(cryptoRoutes(deps.crypto))
    await api.register(batchRoutes(deps.batches))
    await api.register(signingRoutes(deps.signing))
    await api.register(dataKeyRoutes(deps.crypto))
    await api.register(secretRoutes(deps.secrets))
    await api.register(folderRoutes(deps.folders))
    await api.register(teamRoutes(deps.team))
    await api.register(settingsRoutes(deps.settings))
    await api.register(applicationRoutes(deps.applications))
    await api.register(endUserRoutes(deps.endusers))
    await api.register(roleRoutes(deps.roles))
    await api.register(accessPolicyRoutes(deps.accessPolicies))
    await api.register(samlRoutes(deps.federation))
    await api.register(billingRoutes(deps.billing))
    await api.register(partnerRoutes(deps.partners, { redis: deps.redis, prefix: deps.redisPrefix }))
    await api.register(
      signupRoutes(deps.signups, {
        redis: deps.redis,
        prefix: deps.redisPrefix,
        perHour: deps.signupRatePerHour,
      }),
    )
    api.get('/openapi.json', { config: { access: access.public() }, schema: { hide: true } }, async () =>
      openApiDocument(),
    )
  }
}
