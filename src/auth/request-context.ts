import type { FastifyRequest } from 'fastify'
import { unauthorized } from '../platform/errors.ts'
import { actorIdOf, type Principal } from './principal.ts'

/** A partner's caller: an API key (`kmsp_…`) or a person signed in to the partner portal. */
export interface PartnerCredential {
  partnerId: string
  keyId: string | null
  accountId: string | null
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the authentication hook on every non-public /api/v1 request. */
    principal: Principal | null
    /**
     * Set instead on partner routes (access kind `partner`): which partner, through which API key
     * or which portal account (exactly one of the two).
     */
    partner: PartnerCredential | null
  }
}

/** Who did it, for audit records and `created_by` columns. */
export interface Actor {
  tenantId: string
  actor: string
  requestId: string | null
  clientIp: string | null
}

export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw unauthorized()
  return request.principal
}

export function actorOf(request: FastifyRequest): Actor {
  const principal = principalOf(request)
  return {
    tenantId: principal.tenantId,
    actor: actorIdOf(principal),
    requestId: request.id,
    clientIp: request.ip,
  }
}
