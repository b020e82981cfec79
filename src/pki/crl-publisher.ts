import type { Actor } from '../auth/request-context.ts'
import type { IssuerSigner } from '../crypto/issuer-signer.ts'
import type { Sql } from '../data/database.ts'
import type { Clock } from '../platform/clock.ts'
import { buildCrl, type RevocationReason } from './crl.ts'
import { type CaRow, markCrlStale, reserveCrl, storeCrl } from './pki-store.ts'
import { type IssuerAlgorithm, keyIdentifierOf, parseCertificate } from './x509.ts'

const HOUR = 3_600_000
/** A CRL is valid 72 hours; the job process rebuilds it 12 hours before it ends (Vault's practice). */
const CRL_LIFETIME_MS = 72 * HOUR
export const CRL_REFRESH_BEFORE_MS = 12 * HOUR
/** A CA whose CRL build failed is tried again after this long (its key revoked, the pool busy). */
const CRL_RETRY_MS = HOUR

/** The key identifier a CA's certificates carry as their authority key identifier. */
export function caKeyIdentifier(certificate: Buffer): Buffer {
  const parsed = parseCertificate(certificate)
  return parsed.subjectKeyIdentifier ?? keyIdentifierOf(parsed.subjectPublicKeyInfo)
}

export interface CrlPublisher {
  /**
   * Builds, signs and keeps the CA's next CRL: its number and entries are taken in one short
   * transaction (pki-store reserveCrl), the signature is made outside it, and a CRL is kept only
   * when no newer one was (a revocation and the job may race). On failure the CA is marked stale
   * so that the next sweep tries again.
   */
  publish(actor: Actor, ca: CaRow): Promise<Buffer>
}

export function createCrlPublisher(deps: { sql: Sql; signer: IssuerSigner; clock: Clock }): CrlPublisher {
  return {
    async publish(actor, ca) {
      if (!ca.certificate) throw new Error('a pending CA has no CRL')
      const now = deps.clock.now()
      const { crlNumber, entries } = await reserveCrl(deps.sql, ca.id, now)
      try {
        const key = await deps.signer.open(actor, {
          keyId: ca.key_id,
          keyVersion: ca.key_version,
          issuer: 'pki',
        })
        const nextUpdate = new Date(now.getTime() + CRL_LIFETIME_MS)
        const der = await buildCrl(
          {
            issuer: ca.subject_der,
            signatureAlgorithm: ca.algorithm as IssuerAlgorithm,
            thisUpdate: now,
            nextUpdate,
            crlNumber,
            authorityKeyIdentifier: caKeyIdentifier(ca.certificate),
            entries: entries.map((entry) => ({
              serial: Buffer.from(entry.serial, 'hex'),
              revokedAt: entry.revoked_at,
              reason: entry.reason as RevocationReason,
            })),
          },
          (tbs) => key.sign(tbs),
        )
        await storeCrl(deps.sql, ca.id, { der, number: crlNumber, nextUpdate })
        return der
      } catch (error) {
        await markCrlStale(deps.sql, ca.id, new Date(now.getTime() + CRL_RETRY_MS))
        throw error
      }
    },
  }
}
