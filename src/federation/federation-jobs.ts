import type { ModuleJobs } from '../platform/module.ts'
import type { FederationService } from './saml-service.ts'

/** `saml-sweep` (maintenance): deletes SAML requests and assertion ids past their time. */
export function federationJobs(deps: { federation: Pick<FederationService, 'sweep'> }): ModuleJobs {
  return {
    sweeps: [
      {
        name: 'saml-sweep',
        queue: 'maintenance',
        async run() {
          const samlRows = await deps.federation.sweep()
          return { worked: samlRows > 0, message: 'saml sweep', details: { samlRows } }
        },
      },
    ],
  }
}
