import type { AuditLog } from '../audit/audit-log.ts'
import type { Module } from '../platform/module.ts'
import { apiKeyRoutes } from './api-key-routes.ts'
import type { ApiKeyService } from './api-key-service.ts'

/** API keys of a tenant: issue, list, revoke, rotate. */
export function apiKeysModule(deps: { apiKeys: ApiKeyService; audit: AuditLog }): Module {
  return { name: 'api-keys', routes: apiKeyRoutes(deps.apiKeys, deps.audit) }
}
