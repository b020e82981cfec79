import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { LoginPanelBody, LoginPanelSchema } from '../branding/login-panel.ts'
import { errorResponses } from '../http/http-schemas.ts'
import { SecuritySettingsPatchBody, SecuritySettingsSchema } from './settings-schemas.ts'
import type { SecuritySettingsPatch, SettingsService } from './settings-service.ts'

const TAGS = ['Settings']

export function settingsRoutes(settings: SettingsService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/settings/security',
      {
        // Any caller of the tenant may read the posture it works under.
        config: { access: access.authenticated() },
        schema: {
          tags: TAGS,
          summary: 'The tenant’s security settings',
          operationId: 'getSecuritySettings',
          response: { 200: SecuritySettingsSchema, ...errorResponses() },
        },
      },
      async (request) => settings.getSecurity(actorOf(request).tenantId),
    )
    app.patch(
      '/settings/security',
      {
        // Spec 5.3: a session of an owner or admin; every API key and other role gets 403 forbidden.
        config: { access: access.role('tenant:owner', 'tenant:admin') },
        schema: {
          tags: TAGS,
          summary:
            'Change security settings (MFA methods, password policy, session lifetimes, API-key policy); audited',
          operationId: 'updateSecuritySettings',
          body: SecuritySettingsPatchBody,
          response: { 200: SecuritySettingsSchema, ...errorResponses(403) },
        },
      },
      async (request) => settings.updateSecurity(actorOf(request), request.body as SecuritySettingsPatch),
    )
    app.get(
      '/settings/branding',
      {
        config: { access: access.authenticated() },
        schema: {
          tags: TAGS,
          summary:
            'The tenant’s login panel (image, title and text per locale): the fallback of its applications',
          operationId: 'getBranding',
          response: { 200: LoginPanelSchema, ...errorResponses() },
        },
      },
      async (request) => settings.getBranding(actorOf(request).tenantId),
    )
    app.put(
      '/settings/branding',
      {
        config: { access: access.role('tenant:owner', 'tenant:admin') },
        schema: {
          tags: TAGS,
          summary: 'Replace the tenant’s login panel; audited with the editor',
          operationId: 'updateBranding',
          body: LoginPanelBody,
          response: { 200: LoginPanelSchema, ...errorResponses(403) },
        },
      },
      async (request) => settings.updateBranding(actorOf(request), request.body),
    )
  }
}
