import type { AuditLog } from '../audit/audit-log.ts'
import type { IssuerSigner } from '../crypto/issuer-signer.ts'
import type { Sql } from '../data/database.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import type { KeyService } from '../keys/key-service.ts'
import type { Clock } from '../platform/clock.ts'
import type { Module } from '../platform/module.ts'
import { createSshCaService, type SshCaService } from './ssh-ca-service.ts'
import { createSshCertificateService, type SshCertificateService } from './ssh-certificate-service.ts'
import { sshRoutes } from './ssh-routes.ts'

export interface SshServices {
  cas: SshCaService
  certificates: SshCertificateService
}

/** The domain's services: CAs on keys of the keys domain, signing through the issuer signer. */
export function createSshServices(deps: {
  sql: Sql
  audit: AuditLog
  keys: KeyService
  signer: IssuerSigner
  random: RandomSource
  clock: Clock
}): SshServices {
  const { sql, audit, signer, clock } = deps
  return {
    cas: createSshCaService({ sql, audit, keys: deps.keys, signer, clock }),
    certificates: createSshCertificateService({ sql, audit, signer, random: deps.random, clock }),
  }
}

/** The SSH certificate authorities of tenants and the certificates they issue (docs/ssh.md). */
export function sshModule(deps: SshServices): Module {
  return {
    name: 'ssh',
    routes: async (api) => {
      await api.register(sshRoutes(deps))
    },
  }
}
