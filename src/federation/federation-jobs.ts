import { type ModuleJobs, sweep } from '../platform/module.ts'
import type { FederationService } from './saml-service.ts'

/** `saml-sweep` (maintenance): deletes SAML requests and assertion ids past their time. */
export function federationJobs(deps: { federation: Pick<FederationService, 'sweep'> }): ModuleJobs {
  return {
    sweeps: [
      sweep('saml-sweep', 'maintenance', 'saml sweep', async () => ({
        samlRows: await deps.federation.sweep(),
      })),
    ],
  }
}
