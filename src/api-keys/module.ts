import type { AuditLog } from '../audit/audit-log.ts'
import { type Module, sweep } from '../platform/module.ts'
import { apiKeyRoutes } from './api-key-routes.ts'
import type { ApiKeyService } from './api-key-service.ts'

/**
 * API keys of a tenant: issue, list, revoke, rotate. `api-key-last-use-sweep` (maintenance)
 * folds the audit records made with each key since the last fold into its `lastUsedAt` (the audit
 * feed: each record once, whichever sweep gets there).
 */
export function apiKeysModule(deps: { apiKeys: ApiKeyService; audit: AuditLog }): Module {
  return {
    name: 'api-keys',
    routes: apiKeyRoutes(deps.apiKeys, deps.audit),
    jobs: {
      sweeps: [
        sweep(
          'api-key-last-use-sweep',
          'maintenance',
          'API key last-use sweep',
          async () => ({ foldedApiKeyUses: await deps.apiKeys.foldLastUse() }),
          // Runs at every sweep while keys are used: not worth a line.
          () => false,
        ),
      ],
    },
  }
}
