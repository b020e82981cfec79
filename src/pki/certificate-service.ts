import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { IssuerSigner } from '../crypto/issuer-signer.ts'
import { type AuditTarget, auditedOperation } from '../crypto/operation-audit.ts'
import type { CryptoPool } from '../crypto-pool/crypto-pool.ts'
import type { Sql } from '../data/database.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, invalidField, notFound } from '../platform/errors.ts'
import {
  BACKDATE_MS,
  type CaService,
  caPending,
  INTERMEDIATE_ROLE,
  randomSerial,
  requireIssuing,
} from './ca-service.ts'
import { type CrlPublisher, caKeyIdentifier } from './crl-publisher.ts'
import { CsrError, parseCsr } from './csr.ts'
import { checkNameConstraints } from './name-constraints.ts'
import {
  CA_LIMITS,
  type IssueCertificateBody,
  type LeafKeyAlgorithm,
  type ListCertificatesQuery,
  type RevokeBody,
} from './pki-schemas.ts'
import {
  type CaRow,
  type CertificateRow,
  claimUrls,
  getCertificate,
  getRevocation,
  getRole,
  insertCertificate,
  insertRevocation,
  listCertificates,
  markCaRevoked,
  markRevoked,
} from './pki-store.ts'
import {
  checkKeyAlgorithm,
  checkNames,
  type LeafNames,
  leafLifetime,
  type RoleSettings,
} from './role-policy.ts'
import { roleNotFound, settingsOf } from './role-service.ts'
import {
  buildCertificate,
  encodeName,
  type IssuerAlgorithm,
  type KeyUsageName,
  keyIdentifierOf,
  toPem,
} from './x509.ts'

const DAY_MS = 86_400_000
/** An empty Name: the subject of a leaf with no common name (its SANs are then critical). */
const EMPTY_NAME = Buffer.of(0x30, 0x00)

interface CertificateView {
  serial: string
  caId: string
  role: string
  commonName: string | null
  dnsNames: string[]
  ipAddresses: string[]
  keyAlgorithm: string
  notBefore: string
  notAfter: string
  status: 'valid' | 'revoked' | 'expired'
  revokedAt: string | null
  revocationReason: string | null
  certificate: string
  createdAt: string
}

interface RevocationView {
  serial: string
  caId: string
  revokedAt: string
  revocationReason: string
  /** Whether the service kept the certificate (false: issued under a noStore role). */
  stored: boolean
}

interface IssuedCertificate extends CertificateView {
  stored: boolean
  chain: string[]
  privateKey?: string
}

function view(row: CertificateRow, now: Date): CertificateView {
  return {
    serial: row.serial,
    caId: row.ca_id,
    role: row.role,
    commonName: row.common_name,
    dnsNames: row.alt_names.dns,
    ipAddresses: row.alt_names.ip,
    keyAlgorithm: row.key_algorithm,
    notBefore: row.not_before.toISOString(),
    notAfter: row.not_after.toISOString(),
    status: row.revoked_at ? 'revoked' : row.not_after <= now ? 'expired' : 'valid',
    revokedAt: row.revoked_at?.toISOString() ?? null,
    revocationReason: row.revocation_reason,
    certificate: toPem(row.der, 'CERTIFICATE'),
    createdAt: row.created_at.toISOString(),
  }
}

/**
 * A serial a certificate can carry (RFC 5280 §4.1.2.2: a positive integer of at most 20 octets),
 * else a 400: a CRL must never be handed one it cannot encode.
 */
function revocableSerial(serial: string): string {
  const hex = normalSerial(serial)
  if (hex.length > 40 || /^0*$/.test(hex) || Number.parseInt(hex.slice(0, 2), 16) >= 0x80)
    throw invalidField('serial', 'must be a positive integer of at most 20 octets, in hex')
  return hex
}

/** A serial as the API names it: hex, colons and case ignored, without leading zero bytes. */
function normalSerial(serial: string): string {
  const hex = serial
    .replaceAll(':', '')
    .toLowerCase()
    .replace(/^(00)+(?=..)/, '')
  if (hex.length % 2 === 1) return `0${hex}`
  return hex
}

/**
 * The key usages a leaf of this key algorithm may carry of the role's: an ML-KEM key only
 * enciphers keys (RFC 9935 §5: keyEncipherment alone); signature-only keys (EdDSA, ML-DSA,
 * SLH-DSA) cannot encipher or agree; ECDSA keys cannot encipher.
 */
function usagesFor(algorithm: string, role: RoleSettings): KeyUsageName[] {
  if (algorithm.startsWith('ML-KEM')) return ['keyEncipherment']
  if (algorithm.startsWith('RSA')) return role.keyUsage
  const allowed: string[] = algorithm.startsWith('EC')
    ? ['digitalSignature', 'contentCommitment', 'keyAgreement']
    : ['digitalSignature', 'contentCommitment']
  const usages = role.keyUsage.filter((usage) => allowed.includes(usage))
  return usages.length > 0 ? usages : ['digitalSignature']
}

export interface CertificateService {
  issue(actor: Actor, input: IssueCertificateBody): Promise<IssuedCertificate>
  list(
    actor: Actor,
    query: ListCertificatesQuery,
  ): Promise<{ data: CertificateView[]; total: number; limit: number; offset: number }>
  get(actor: Actor, serial: string): Promise<CertificateView>
  /** Idempotent: revoking again answers the first revocation. The CRL is rebuilt before the answer. */
  revoke(actor: Actor, serial: string, input: RevokeBody): Promise<RevocationView>
}

export function createCertificateService(deps: {
  sql: Sql
  audit: AuditLog
  cas: CaService
  signer: IssuerSigner
  crls: CrlPublisher
  pool: Pick<CryptoPool, 'generateKey'>
  clock: Clock
}): CertificateService {
  const { sql, audit, clock } = deps

  /**
   * The CSR's key (its proof of possession checked) and the names it asks for; for a generated
   * key, only its algorithm's check: the pair is made once the names passed (generate).
   */
  function requestedKey(
    input: IssueCertificateBody,
    role: RoleSettings,
  ): { spki: Buffer; algorithm: string; requested: LeafNames } | { algorithm: LeafKeyAlgorithm } {
    if (input.csr === undefined) {
      const algorithm = input.keyAlgorithm ?? 'EC-P256'
      checkKeyAlgorithm(role, algorithm, 'keyAlgorithm')
      return { algorithm }
    }
    if (input.keyAlgorithm) throw invalidField('keyAlgorithm', 'is for generated keys: a CSR carries its key')
    let csr: ReturnType<typeof parseCsr>
    try {
      csr = parseCsr(input.csr)
    } catch (error) {
      if (error instanceof CsrError) throw invalidField('csr', error.message)
      throw error
    }
    checkKeyAlgorithm(role, csr.keyAlgorithm, 'csr')
    return {
      spki: csr.subjectPublicKeyInfo,
      algorithm: csr.keyAlgorithm,
      requested: { commonName: csr.commonName, dnsNames: csr.requested.dns, ipAddresses: csr.requested.ip },
    }
  }

  /**
   * A key pair for the leaf, made in the crypto pool (its per-tenant queues: a burst of RSA-4096
   * requests waits there, not on the event loop). The private key is answered once, never kept.
   */
  async function generate(
    tenantId: string,
    algorithm: LeafKeyAlgorithm,
  ): Promise<{ spki: Buffer; privateKeyPem: string }> {
    const material = await deps.pool.generateKey(tenantId, algorithm)
    try {
      return { spki: material.publicKey!, privateKeyPem: toPem(material.secret!, 'PRIVATE KEY') }
    } finally {
      material.secret?.fill(0)
    }
  }

  /** The leaf's end: its TTL from now, within the CA's end (refused or cut, as the role says). */
  function notAfterOf(ca: CaRow, role: RoleSettings, ttlSeconds: number, now: Date): Date {
    const notAfter = new Date(now.getTime() + ttlSeconds * 1000)
    if (notAfter <= ca.not_after!) return notAfter
    if (role.notAfterBehavior === 'truncate') return ca.not_after!
    throw new AppError(
      400,
      'not_after_beyond_ca',
      `The certificate would end after its CA (${ca.not_after!.toISOString()}); ask for a shorter ttlSeconds or set the role's notAfterBehavior to truncate`,
      { rule: 'not_after_beyond_ca', field: 'ttlSeconds' },
    )
  }

  return {
    async issue(actor, input) {
      const target: AuditTarget = { action: 'crypto.certificate_issue', keyId: null }
      return auditedOperation(audit, actor, target, async () => {
        const ca = await deps.cas.row(actor, input.caId)
        target.keyId = ca.key_id
        target.keyVersion = ca.key_version
        requireIssuing(ca)
        const now = clock.now()
        if (ca.not_after <= now) throw new AppError(409, 'ca_expired', 'The CA has expired')
        const roleRow = await getRole(sql, actor.tenantId, ca.id, input.role)
        if (!roleRow) throw roleNotFound()
        const role = settingsOf(roleRow)
        const ttl = leafLifetime(role, input.ttlSeconds)
        const asked = requestedKey(input, role)
        const fromCsr = 'requested' in asked ? asked.requested : undefined
        const names = checkNames(role, {
          commonName: input.commonName ?? fromCsr?.commonName ?? null,
          dnsNames: input.dnsNames ?? fromCsr?.dnsNames ?? [],
          ipAddresses: input.ipAddresses ?? fromCsr?.ipAddresses ?? [],
        })
        checkNameConstraints(await deps.cas.constraintsAbove(actor, ca), names)
        const generated = 'spki' in asked ? undefined : await generate(actor.tenantId, asked.algorithm)
        const key = { algorithm: asked.algorithm, spki: 'spki' in asked ? asked.spki : generated!.spki }
        const notBefore = new Date(now.getTime() - BACKDATE_MS)
        const notAfter = notAfterOf(ca, role, ttl, now)
        const serial = randomSerial()
        const urls = await claimUrls(sql, ca, now)
        const signer = await deps.signer.open(actor, {
          keyId: ca.key_id,
          keyVersion: ca.key_version,
          issuer: 'pki',
        })
        const der = await buildCertificate(
          {
            serial,
            issuer: ca.subject_der,
            subject: names.commonName ? encodeName({ commonName: names.commonName }) : EMPTY_NAME,
            notBefore,
            notAfter,
            subjectPublicKeyInfo: key.spki,
            signatureAlgorithm: ca.algorithm as IssuerAlgorithm,
            basicConstraints: { ca: false },
            keyUsage: usagesFor(key.algorithm, role),
            ...(role.extKeyUsage.length > 0 ? { extendedKeyUsage: role.extKeyUsage } : {}),
            subjectAltNames: { dns: names.dnsNames, ip: names.ipAddresses },
            subjectKeyIdentifier: keyIdentifierOf(key.spki),
            authorityKeyIdentifier: caKeyIdentifier(ca.certificate),
            crlDistributionPoints: urls.crl_urls,
            authorityInfoAccess: { caIssuers: urls.issuer_urls, ocsp: urls.ocsp_urls },
          },
          (tbs) => signer.sign(tbs),
        )
        const row: CertificateRow = {
          tenant_id: actor.tenantId,
          serial: serial.toString('hex'),
          ca_id: ca.id,
          role: input.role,
          common_name: names.commonName,
          alt_names: { dns: names.dnsNames, ip: names.ipAddresses },
          key_algorithm: key.algorithm,
          der,
          not_before: notBefore,
          not_after: notAfter,
          revoked_at: null,
          revocation_reason: null,
          created_at: now,
          created_by: actor.actor,
        }
        if (!role.noStore) await insertCertificate(sql, row)
        const issued: IssuedCertificate = {
          ...view(row, now),
          stored: !role.noStore,
          chain: [ca.certificate, ...ca.chain].map((c) => toPem(c, 'CERTIFICATE')),
          ...(generated ? { privateKey: generated.privateKeyPem } : {}),
        }
        return {
          result: issued,
          record: {
            action: target.action,
            keyId: ca.key_id,
            keyVersion: ca.key_version,
            details: { caId: ca.id, serial: row.serial, role: input.role, stored: !role.noStore },
          },
        }
      })
    },

    async list(actor, query) {
      const now = clock.now()
      const { rows, total } = await listCertificates(sql, actor.tenantId, {
        caId: query.caId,
        status: query.status,
        endingBefore: query.expiringWithinDays
          ? new Date(now.getTime() + query.expiringWithinDays * DAY_MS)
          : undefined,
        now,
        limit: query.limit,
        offset: query.offset,
      })
      return { data: rows.map((row) => view(row, now)), total, limit: query.limit, offset: query.offset }
    },

    async get(actor, serial) {
      const row = await getCertificate(sql, actor.tenantId, normalSerial(serial))
      if (!row) throw notFound('certificate_not_found', 'Certificate')
      return view(row, clock.now())
    },

    async revoke(actor, rawSerial, input) {
      const serial = revocableSerial(rawSerial)
      const reason = input.reason ?? 'unspecified'
      const target: AuditTarget = { action: 'crypto.certificate_revoke', keyId: null }
      return auditedOperation(audit, actor, target, async () => {
        const stored = await getCertificate(sql, actor.tenantId, serial)
        if (stored && input.caId && input.caId !== stored.ca_id)
          throw invalidField('caId', 'names another CA than the one that issued the certificate')
        const caId = stored?.ca_id ?? input.caId
        if (!caId)
          throw notFound(
            'certificate_not_found',
            'Certificate (for one the service did not store, name its caId)',
          )
        const ca = await deps.cas.row(actor, caId)
        target.keyId = ca.key_id
        target.keyVersion = ca.key_version
        if (!ca.certificate) throw caPending()
        // Before anything is written: a caller who may not sign with the CA's key (an API key
        // restricted to other keys, a revoked CA key) cannot revoke either.
        await deps.signer.open(actor, { keyId: ca.key_id, keyVersion: ca.key_version, issuer: 'pki' })
        const now = clock.now()
        // A certificate not stored (noStore) stays listed as long as any leaf of the CA could live.
        const listedUntil = stored?.not_after ?? new Date(now.getTime() + CA_LIMITS.maxLeafSeconds * 1000)
        // The first revocation of a serial stands (its time and reason, on the CRL and the
        // certificate alike): concurrent or repeated revocations answer it and change nothing.
        const first = await sql.begin(async (tx) => {
          const inserted = await insertRevocation(tx, {
            serial,
            revoked_at: now,
            reason,
            tenant_id: actor.tenantId,
            ca_id: ca.id,
            listed_until: listedUntil,
          })
          if (inserted && stored) await markRevoked(tx, actor.tenantId, serial, now, reason)
          // An intermediate of the tenant whose certificate this is stops issuing.
          if (inserted && stored?.role === INTERMEDIATE_ROLE) await markCaRevoked(tx, ca.id, serial, now)
          return inserted
        })
        const revocation = first ? { revoked_at: now, reason } : (await getRevocation(sql, ca.id, serial))!
        // At once, not at the next sweep: relying parties fetching the CRL now see it. A repeat
        // rebuilds it only when an earlier build failed (the CA is still marked stale).
        if (first || (await deps.cas.row(actor, caId)).crl_stale) await deps.crls.publish(actor, ca)
        return {
          result: {
            serial,
            caId: ca.id,
            revokedAt: revocation.revoked_at.toISOString(),
            revocationReason: revocation.reason,
            stored: stored !== undefined,
          },
          record: {
            // A repeat is recorded, not metered: nothing was revoked.
            action: first ? target.action : 'pki.certificate_revoke_repeated',
            keyId: ca.key_id,
            keyVersion: ca.key_version,
            details: { caId: ca.id, serial, reason: revocation.reason, stored: stored !== undefined },
          },
        }
      })
    },
  }
}
