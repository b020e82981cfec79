import { randomUUID } from 'node:crypto'
import type { Static } from 'typebox'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import { type IssuerSigner, requireSignAllowed } from '../crypto/issuer-signer.ts'
import { type AuditTarget, auditedOperation } from '../crypto/operation-audit.ts'
import type { Sql } from '../data/database.ts'
import type { RandomSource } from '../entropy/random-source.ts'
import { requireKeyAllowed } from '../keys/alias-refs.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, isUniqueViolation, notFound } from '../platform/errors.ts'
import { sshCaNotFound } from './ssh-ca-service.ts'
import {
  assembleCertificate,
  type CriticalOptions,
  certificateLine,
  certificateToBeSigned,
  type PermitExtension,
  sshSignature,
} from './ssh-certificate.ts'
import {
  BACKDATE_SECONDS,
  checkPrincipals,
  checkSourceAddress,
  DEFAULT_USER_EXTENSIONS,
  refuseHostOptions,
  validityTooLong,
} from './ssh-policy.ts'
import type {
  ListSshCertificatesQuery,
  RevokeSshCertificateBody,
  SignSshCertificateBody,
  SshCertificateSchema,
} from './ssh-schemas.ts'
import {
  findCa,
  findCertificate,
  insertCertificate,
  listCertificates,
  revokeCertificate,
  SERIAL_CONSTRAINT,
  type SshCaRow,
  type SshCertificateRow,
} from './ssh-store.ts'
import { parsePublicKeyLine } from './ssh-wire.ts'

type SshCertificateView = Static<typeof SshCertificateSchema>

export interface SshCertificateService {
  /** Signs a public key: audited and metered as `crypto.ssh_certificate_issue` of the CA's key. */
  issue(actor: Actor, body: SignSshCertificateBody): Promise<SshCertificateView>
  get(actor: Actor, id: string): Promise<SshCertificateView>
  list(actor: Actor, query: ListSshCertificatesQuery): Promise<{ data: SshCertificateView[]; total: number }>
  /** Revokes: audited and metered as `crypto.ssh_certificate_revoke` of the CA's key. */
  revoke(actor: Actor, id: string, body: RevokeSshCertificateBody): Promise<SshCertificateView>
}

const ISSUE = 'crypto.ssh_certificate_issue'
const REVOKE = 'crypto.ssh_certificate_revoke'
/** Serial draws before giving up: a collision of random 64-bit serials is already out of reach. */
const SERIAL_ATTEMPTS = 3
const HOUR_MS = 3_600_000

const certificateNotFound = () => notFound('ssh_certificate_not_found', 'SSH certificate')
const alreadyRevoked = () =>
  new AppError(409, 'ssh_certificate_revoked', 'The certificate is already revoked')

function certificateView(row: SshCertificateRow, now: Date): SshCertificateView {
  return {
    id: row.id,
    caId: row.ca_id,
    type: row.cert_type,
    serial: row.serial,
    keyId: row.key_identity,
    principals: row.principals,
    validAfter: row.valid_after.toISOString(),
    validBefore: row.valid_before.toISOString(),
    publicKeyType: row.public_key_type,
    publicKeyFingerprint: row.public_key_fingerprint,
    criticalOptions: row.critical_options,
    extensions: row.extensions,
    certificate: row.certificate,
    status: row.revoked_at ? 'revoked' : row.valid_before.getTime() <= now.getTime() ? 'expired' : 'valid',
    revokedAt: row.revoked_at?.toISOString() ?? null,
    revocationReason: row.revocation_reason,
    createdAt: row.created_at.toISOString(),
    createdBy: row.created_by,
  }
}

/** Whole seconds: certificates state times in seconds, and the stored row says what was signed. */
const wholeSeconds = (ms: number) => new Date(Math.floor(ms / 1000) * 1000)

export function createSshCertificateService(deps: {
  sql: Sql
  audit: AuditLog
  signer: IssuerSigner
  random: RandomSource
  clock: Clock
}): SshCertificateService {
  const { sql, audit, clock } = deps

  /** A random non-zero uint64 (a KRL cannot revoke serial 0). */
  function randomSerial(): bigint {
    for (;;) {
      const serial = deps.random.bytes(8).readBigUInt64BE()
      if (serial !== 0n) return serial
    }
  }

  /** What the request asks the certificate to allow, checked against the CA's type. */
  function permissions(
    ca: SshCaRow,
    body: SignSshCertificateBody,
  ): { criticalOptions: CriticalOptions; extensions: readonly PermitExtension[] } {
    if (ca.ca_type === 'host') {
      refuseHostOptions(body, 'body')
      return { criticalOptions: {}, extensions: [] }
    }
    const requested = body.criticalOptions ?? {}
    if (requested.sourceAddress !== undefined)
      checkSourceAddress(requested.sourceAddress, 'body/criticalOptions/sourceAddress')
    const criticalOptions: CriticalOptions = {}
    if (requested.forceCommand !== undefined) criticalOptions.forceCommand = requested.forceCommand
    if (requested.sourceAddress !== undefined) criticalOptions.sourceAddress = requested.sourceAddress
    return { criticalOptions, extensions: body.extensions ?? DEFAULT_USER_EXTENSIONS }
  }

  return {
    issue(actor, body) {
      const target: AuditTarget = { action: ISSUE, keyId: null }
      return auditedOperation(audit, actor, target, async () => {
        const { key: subject, comment } = parsePublicKeyLine(body.publicKey, 'body/publicKey')
        checkPrincipals(body.principals, 'body/principals')
        const ca = await findCa(sql, actor.tenantId, body.caId)
        if (!ca) throw sshCaNotFound()
        target.keyId = ca.key_id
        target.keyVersion = ca.key_version
        const { criticalOptions, extensions } = permissions(ca, body)
        const validity = body.validitySeconds ?? ca.default_validity_seconds
        if (validity > ca.max_validity_seconds)
          throw validityTooLong(ca.max_validity_seconds, 'body/validitySeconds')
        // Through the key resolver for the caller: its tenant, its API-key restriction, the key's state.
        const signer = await deps.signer.open(actor, {
          keyId: ca.key_id,
          keyVersion: ca.key_version,
          signatureFormat: 'P1363',
          issuer: 'ssh',
        })
        const now = clock.now()
        const id = randomUUID()
        const keyId = body.keyId ?? id
        const validAfter = wholeSeconds(now.getTime() - BACKDATE_SECONDS * 1000)
        const validBefore = wholeSeconds(now.getTime() + validity * 1000)
        for (let attempt = 1; ; attempt++) {
          const serial = randomSerial()
          const toBeSigned = certificateToBeSigned({
            nonce: deps.random.bytes(32),
            subject,
            serial,
            type: ca.ca_type,
            keyId,
            principals: body.principals,
            validAfter,
            validBefore,
            criticalOptions,
            extensions,
            caKey: ca.public_key,
          })
          const certificate = assembleCertificate(
            toBeSigned,
            sshSignature(signer.spec, await signer.sign(toBeSigned)),
          )
          const row: SshCertificateRow = {
            id,
            tenant_id: actor.tenantId,
            ca_id: ca.id,
            serial: serial.toString(),
            cert_type: ca.ca_type,
            key_identity: keyId,
            principals: [...body.principals],
            valid_after: validAfter,
            valid_before: validBefore,
            public_key_type: subject.type,
            public_key_fingerprint: subject.fingerprint,
            critical_options: criticalOptions as SshCertificateRow['critical_options'],
            extensions: [...extensions].sort(),
            certificate: certificateLine(subject.type, certificate, comment),
            created_at: now,
            created_by: actor.actor,
            revoked_at: null,
            revoked_by: null,
            revocation_reason: null,
          }
          try {
            await insertCertificate(sql, row)
          } catch (error) {
            if (isUniqueViolation(error, SERIAL_CONSTRAINT) && attempt < SERIAL_ATTEMPTS) continue
            throw error
          }
          return {
            result: certificateView(row, now),
            record: {
              action: ISSUE,
              keyId: ca.key_id,
              keyVersion: ca.key_version,
              details: { caId: ca.id, certificateId: id, serial: row.serial, certType: ca.ca_type },
            },
          }
        }
      })
    },

    async get(actor, id) {
      const row = await findCertificate(sql, actor.tenantId, id)
      if (!row) throw certificateNotFound()
      return certificateView(row, clock.now())
    },

    async list(actor, query) {
      const now = clock.now()
      const { rows, total } = await listCertificates(
        sql,
        actor.tenantId,
        {
          caType: query.caType,
          revoked: query.revoked,
          expiringBy:
            query.expiringWithinHours === undefined
              ? undefined
              : new Date(now.getTime() + query.expiringWithinHours * HOUR_MS),
          now,
        },
        { limit: query.limit, offset: query.offset },
      )
      return { data: rows.map((row) => certificateView(row, now)), total }
    },

    revoke(actor, id, body) {
      const target: AuditTarget = { action: REVOKE, keyId: null }
      return auditedOperation(audit, actor, target, async () => {
        const certificate = await findCertificate(sql, actor.tenantId, id)
        if (!certificate) throw certificateNotFound()
        const ca = await findCa(sql, actor.tenantId, certificate.ca_id)
        if (!ca) throw sshCaNotFound()
        target.keyId = ca.key_id
        target.keyVersion = ca.key_version
        // Revoking is the CA key's operation as signing is: an API key restricted to other keys,
        // or to other operations than sign, may not do it.
        requireSignAllowed(actor)
        await requireKeyAllowed(sql, actor, ca.key_id)
        if (certificate.revoked_at) throw alreadyRevoked()
        const now = clock.now()
        const revoked = await revokeCertificate(sql, actor.tenantId, id, {
          revoked_at: now,
          revoked_by: actor.actor,
          revocation_reason: body.reason ?? null,
        })
        if (!revoked) throw alreadyRevoked()
        return {
          result: certificateView(revoked, now),
          record: {
            action: REVOKE,
            keyId: ca.key_id,
            keyVersion: ca.key_version,
            details: { caId: ca.id, certificateId: id, serial: revoked.serial, certType: revoked.cert_type },
          },
        }
      })
    },
  }
}
