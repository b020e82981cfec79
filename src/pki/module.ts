import { type Module, type ModuleJobs, sweep } from '../platform/module.ts'
import type { CaService } from './ca-service.ts'
import type { CertificateService } from './certificate-service.ts'
import type { OcspResponder } from './ocsp-responder.ts'
import { pkiRoutes } from './pki-routes.ts'
import type { RoleService } from './role-service.ts'

/**
 * `crl-refresh-sweep` (maintenance): rebuilds the CRLs that end within 12 hours, and those a
 * revocation left stale (its own rebuild failed).
 */
function pkiJobs(cas: Pick<CaService, 'refreshCrls'>): ModuleJobs {
  return {
    sweeps: [sweep('crl-refresh-sweep', 'maintenance', 'CRL refresh', (sweepId) => cas.refreshCrls(sweepId))],
  }
}

/** X.509 certificate authorities: CAs, roles, certificates, CRLs (docs/pki.md). */
export function pkiModule(deps: {
  cas: CaService
  roles: RoleService
  certificates: CertificateService
  ocsp: OcspResponder
}): Module {
  return {
    name: 'pki',
    routes: pkiRoutes(deps),
    jobs: pkiJobs(deps.cas),
  }
}
