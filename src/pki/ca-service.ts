import { randomBytes, randomUUID, X509Certificate } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import { type IssuerKey, type IssuerSigner, requireSignAllowed } from '../crypto/issuer-signer.ts'
import { type AuditTarget, auditedOperation } from '../crypto/operation-audit.ts'
import type { Sql } from '../data/database.ts'
import {
  type KeyService,
  type KeyView,
  requireIssuerKey,
  requireKeyWriteForExistingKey,
} from '../keys/key-service.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, invalidField, isUniqueViolation, notFound } from '../platform/errors.ts'
import { CRL_REFRESH_BEFORE_MS, type CrlPublisher, caKeyIdentifier } from './crl-publisher.ts'
import { buildCsr } from './csr.ts'
import type { NameConstraints } from './name-constraints.ts'
import { CA_ALGORITHMS, CA_LIMITS, type CreateCaBody, type ImportCaCertificateBody } from './pki-schemas.ts'
import {
  CA_NAME_CONSTRAINT,
  type CaRow,
  caNameTaken,
  claimUrls,
  crlsDue,
  getCa,
  getPublicCa,
  insertCa,
  insertCertificate,
  listCas,
  updateCa,
} from './pki-store.ts'
import {
  buildCertificate,
  encodeName,
  fromPem,
  type IssuerAlgorithm,
  keyIdentifierOf,
  parseCertificate,
  toPem,
} from './x509.ts'
import { encodeSubtrees } from './x509-names.ts'

const DAY_MS = 86_400_000
/** notBefore is set this far back, for clients whose clocks run a little late (Vault's practice). */
export const BACKDATE_MS = 30_000

interface CaView {
  id: string
  name: string
  type: 'root' | 'intermediate'
  status: 'pending' | 'active' | 'revoked'
  parentId: string | null
  keyId: string
  keyVersion: number
  algorithm: string
  subject: Record<string, string> & { commonName: string }
  pathLength: number | null
  nameConstraints: NameConstraints | null
  crlDistributionPoints: string[]
  issuingCertificateUrls: string[]
  ocspUrls: string[]
  certificate: string | null
  chain: string[]
  csr: string | null
  notBefore: string | null
  notAfter: string | null
  /** The first certificate it signed: from then on its CRL and issuer URLs are fixed. */
  firstIssuedAt: string | null
  createdAt: string
  updatedAt: string
}

function caView(row: CaRow): CaView {
  return {
    id: row.id,
    name: row.name,
    type: row.kind,
    status: row.status,
    parentId: row.parent_id,
    keyId: row.key_id,
    keyVersion: row.key_version,
    algorithm: row.algorithm,
    subject: row.subject as CaView['subject'],
    pathLength: row.path_length,
    nameConstraints: row.name_constraints,
    crlDistributionPoints: row.crl_urls,
    issuingCertificateUrls: row.issuer_urls,
    ocspUrls: row.ocsp_urls,
    certificate: row.certificate ? toPem(row.certificate, 'CERTIFICATE') : null,
    chain: row.chain.map((der) => toPem(der, 'CERTIFICATE')),
    csr: row.csr ? toPem(row.csr, 'CERTIFICATE REQUEST') : null,
    notBefore: row.not_before?.toISOString() ?? null,
    notAfter: row.not_after?.toISOString() ?? null,
    firstIssuedAt: row.first_issued_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  }
}

/** 20 random bytes with the top bit clear: a positive 159-bit serial (CA/B Forum: 64 bits at least). */
export function randomSerial(): Buffer {
  const serial = randomBytes(20)
  serial[0]! &= 0x7f
  if (serial[0] === 0) serial[0] = 1
  return serial
}

/**
 * 403 when the caller's API-key restriction could never let it sign with the CA's key: other
 * operations than sign, or (for a key made for the CA) a list of named keys the new one is not in.
 */
function requireCaKeyAllowed(actor: Actor, keyId: string | undefined): void {
  requireSignAllowed(actor)
  if (!keyId && actor.keyRestriction?.keys)
    throw new AppError(
      403,
      'key_not_allowed',
      'This API key is restricted to named keys: a key made for the CA would not be one of them; pass keyId',
    )
}

/** The name constraints' bases encode (DNS names, CIDR ranges), checked before any key is touched. */
function checkNameConstraintsEncoding(constraints: CreateCaBody['nameConstraints']): void {
  if (!constraints) return
  encodeSubtrees(constraints.permittedDnsDomains, constraints.permittedIpRanges, 'nameConstraints.permitted')
  encodeSubtrees(constraints.excludedDnsDomains, constraints.excludedIpRanges, 'nameConstraints.excluded')
}

/** The shortest deletion window (keys domain): a key made for a CA that was then refused goes. */
const MIN_DELETION_DAYS = 7

/** The role name under which a parent records the intermediate certificates it signed. */
export const INTERMEDIATE_ROLE = 'intermediate-ca'

/** 409 unless the CA can issue: active (not pending, not revoked by its parent). */
export function requireIssuing(ca: CaRow): asserts ca is CaRow & { certificate: Buffer; not_after: Date } {
  if (ca.status === 'revoked')
    throw new AppError(
      409,
      'ca_revoked',
      'The CA’s certificate was revoked by its parent: it issues nothing more',
    )
  if (ca.status !== 'active' || !ca.certificate || !ca.not_after) throw caPending()
}

const caNotFound = () => notFound('ca_not_found', 'Certificate authority')

/** 409: the CA waits for its certificate (an intermediate whose parent is outside the service). */
export const caPending = () =>
  new AppError(409, 'ca_pending', 'The CA has no certificate yet: import the one its parent issued first')

export interface CaService {
  /** `caller.missingForExistingKey`: the scopes a CA on `keyId` needs besides certificates:write. */
  create(
    actor: Actor,
    input: CreateCaBody,
    caller: { missingForExistingKey: readonly string[] },
  ): Promise<CaView>
  list(actor: Actor, page: { limit: number; offset: number }): Promise<{ data: CaView[]; total: number }>
  get(actor: Actor, id: string): Promise<CaView>
  /** The CA row, for the certificate service (404 for another tenant's). */
  row(actor: Actor, id: string): Promise<CaRow>
  /**
   * The name constraints of the CA and of every CA above it in the tenant, the CA's first (an
   * outside parent's are not known here: its relying parties enforce them).
   */
  constraintsAbove(actor: Actor, ca: CaRow): Promise<Array<NameConstraints | null>>
  update(
    actor: Actor,
    id: string,
    input: {
      crlDistributionPoints?: string[] | undefined
      issuingCertificateUrls?: string[] | undefined
      ocspUrls?: string[] | undefined
    },
  ): Promise<CaView>
  importCertificate(actor: Actor, id: string, input: ImportCaCertificateBody): Promise<CaView>
  /**
   * What anyone may fetch of a CA without a credential (relying parties: the AIA and CDP URLs):
   * its certificate and its current CRL, by the CA's id alone. 404 when there is none yet.
   */
  published(id: string, what: 'certificate' | 'crl'): Promise<Buffer>
  /**
   * The job process's CRL sweep: rebuilds every active CA's CRL that is stale (a revocation whose
   * build failed) or ends within CRL_REFRESH_BEFORE_MS, at most `limit` per run.
   */
  refreshCrls(sweepId: string, limit?: number): Promise<{ rebuilt: number; failed: number }>
}

export function createCaService(deps: {
  sql: Sql
  audit: AuditLog
  keys: Pick<KeyService, 'create' | 'get' | 'reserve' | 'release' | 'scheduleDeletion'>
  signer: IssuerSigner
  crls: CrlPublisher
  clock: Clock
  /** The service's public URL (the OpenID issuer): the default CRL and CA certificate URLs. */
  publicUrl: () => string
}): CaService {
  const { sql, audit, clock } = deps

  async function row(actor: Actor, id: string): Promise<CaRow> {
    const ca = await getCa(sql, actor.tenantId, id)
    if (!ca) throw caNotFound()
    return ca
  }

  /** The CA's key: the one the caller names (checked, then reserved) or a new one, never exportable. */
  async function caKey(actor: Actor, input: CreateCaBody, caId: string): Promise<KeyView> {
    if (!input.keyId) {
      return deps.keys.create(
        actor,
        {
          // The CA's id in the name: a key name stays taken for good, even once the key is gone.
          name: `pki-ca-${input.name}-${caId.slice(0, 8)}`,
          description: `Key of the certificate authority ${input.name} (${caId})`,
          keyType: 'Signing',
          algorithm: input.algorithm ?? 'ML-DSA-65',
          labels: ['pki-ca'],
          exportable: false,
          reservedFor: 'pki',
        },
        { missingForDefault: [] },
      )
    }
    const key = await deps.keys.get(actor, input.keyId)
    requireIssuerKey(key, CA_ALGORITHMS, 'keyId')
    if (input.algorithm && input.algorithm !== key.algorithm)
      throw invalidField('algorithm', `is ${input.algorithm}, but the key named by keyId is ${key.algorithm}`)
    // From now on the key signs through the PKI alone: no /sign of a hand-made certificate.
    return deps.keys.reserve(actor, key.id, 'pki')
  }

  function lifetime(
    input: CreateCaBody,
    parentEnd: Date | null,
    now: Date,
  ): { notBefore: Date; notAfter: Date } {
    const notBefore = new Date(now.getTime() - BACKDATE_MS)
    if (input.type === 'root') {
      const days = input.validityDays ?? CA_LIMITS.rootDays.default
      if (days < CA_LIMITS.rootDays.min || days > CA_LIMITS.rootDays.max)
        throw invalidField(
          'validityDays',
          `a root CA lives ${CA_LIMITS.rootDays.min} to ${CA_LIMITS.rootDays.max} days (2 to 10 years)`,
        )
      return { notBefore, notAfter: new Date(now.getTime() + days * DAY_MS) }
    }
    const wanted = new Date(
      now.getTime() + (input.validityDays ?? CA_LIMITS.intermediateDays.default) * DAY_MS,
    )
    if (!parentEnd) return { notBefore, notAfter: wanted }
    if (input.validityDays !== undefined && wanted > parentEnd)
      throw invalidField('validityDays', `ends after the parent CA (${parentEnd.toISOString()})`)
    return { notBefore, notAfter: wanted < parentEnd ? wanted : parentEnd }
  }

  /** Signs a CA certificate (self-signed root, or an intermediate under a parent of the tenant). */
  async function signCaCertificate(
    key: IssuerKey,
    input: {
      serial: Buffer
      issuer: Buffer
      subject: Buffer
      spki: Buffer
      authorityKeyIdentifier: Buffer
      lifetime: { notBefore: Date; notAfter: Date }
      pathLength: number | undefined
      nameConstraints: CreateCaBody['nameConstraints']
      parent: CaRow | null
    },
  ): Promise<Buffer> {
    const nc = input.nameConstraints
    return buildCertificate(
      {
        serial: input.serial,
        issuer: input.issuer,
        subject: input.subject,
        notBefore: input.lifetime.notBefore,
        notAfter: input.lifetime.notAfter,
        subjectPublicKeyInfo: input.spki,
        signatureAlgorithm: key.algorithm as IssuerAlgorithm,
        basicConstraints: {
          ca: true,
          ...(input.pathLength === undefined ? {} : { pathLength: input.pathLength }),
        },
        keyUsage: ['digitalSignature', 'keyCertSign', 'cRLSign'],
        subjectKeyIdentifier: keyIdentifierOf(input.spki),
        authorityKeyIdentifier: input.authorityKeyIdentifier,
        ...(nc
          ? {
              nameConstraints: {
                permittedDns: nc.permittedDnsDomains ?? [],
                excludedDns: nc.excludedDnsDomains ?? [],
                permittedIp: nc.permittedIpRanges ?? [],
                excludedIp: nc.excludedIpRanges ?? [],
              },
            }
          : {}),
        ...(input.parent
          ? {
              crlDistributionPoints: input.parent.crl_urls,
              authorityInfoAccess: { caIssuers: input.parent.issuer_urls, ocsp: input.parent.ocsp_urls },
            }
          : {}),
      },
      (tbs) => key.sign(tbs),
    )
  }

  async function activeParent(
    actor: Actor,
    parentId: string,
    pathLength: number | undefined,
  ): Promise<CaRow> {
    const parent = await getCa(sql, actor.tenantId, parentId)
    if (!parent) throw notFound('ca_not_found', 'Parent CA')
    requireIssuing(parent)
    if (parent.path_length === 0)
      throw new AppError(409, 'path_length_exceeded', 'The parent CA has pathLength 0: it may not sign CAs')
    if (parent.path_length !== null && pathLength !== undefined && pathLength >= parent.path_length)
      throw invalidField('pathLength', `must be below the parent's (${parent.path_length})`)
    if (parent.not_after <= clock.now()) throw new AppError(409, 'ca_expired', 'The parent CA has expired')
    return parent
  }

  /** Signs and stores a CA on its (new or reserved) key: its certificate, or its CSR while pending. */
  async function createOnKey(
    actor: Actor,
    input: CreateCaBody,
    context: {
      id: string
      keyView: KeyView
      subjectDer: Buffer
      parent: CaRow | null
      parentKey: IssuerKey | null
      validity: { notBefore: Date; notAfter: Date }
      now: Date
    },
  ): Promise<CaRow> {
    const { id, keyView, subjectDer, parent, parentKey, validity, now } = context
    const key = await deps.signer.open(actor, {
      keyId: keyView.id,
      keyVersion: keyView.version,
      issuer: 'pki',
    })
    const spki = key.publicKey.export({ type: 'spki', format: 'der' })
    const base = deps.publicUrl()
    const pathLength = input.pathLength ?? (parent?.path_length != null ? parent.path_length - 1 : undefined)
    const common = {
      id,
      tenant_id: actor.tenantId,
      name: input.name,
      kind: input.type,
      parent_id: parent?.id ?? null,
      key_id: key.keyId,
      key_version: key.keyVersion,
      algorithm: key.algorithm,
      subject_der: subjectDer,
      subject: input.subject as Record<string, string>,
      path_length: pathLength ?? null,
      name_constraints: input.nameConstraints ?? null,
      crl_urls: input.crlDistributionPoints ?? [`${base}/api/v1/cas/${id}/crl`],
      issuer_urls: input.issuingCertificateUrls ?? [`${base}/api/v1/cas/${id}/certificate`],
      ocsp_urls: input.ocspUrls ?? [`${base}/api/v1/cas/${id}/ocsp`],
      created_at: now,
      created_by: actor.actor,
      updated_at: now,
    }
    let inserted: CaRow
    if (input.type === 'intermediate' && !parent) {
      // An outside parent: a CSR signed by the CA's key; the CA waits for its certificate.
      const csr = await buildCsr(subjectDer, spki, key.algorithm as IssuerAlgorithm, (info) => key.sign(info))
      inserted = await insertOnce(() =>
        insertCa(sql, {
          ...common,
          status: 'pending',
          certificate: null,
          chain: [],
          csr,
          not_before: null,
          not_after: null,
          serial: null,
        }),
      )
    } else {
      const serial = randomSerial()
      const signingKey = parentKey ?? key
      const target: AuditTarget = { action: 'crypto.certificate_issue', keyId: signingKey.keyId }
      const certificate = await auditedOperation(audit, actor, target, async () => {
        const der = await signCaCertificate(signingKey, {
          serial,
          issuer: parent ? parent.subject_der : subjectDer,
          subject: subjectDer,
          spki,
          authorityKeyIdentifier: parent ? caKeyIdentifier(parent.certificate!) : keyIdentifierOf(spki),
          lifetime: validity,
          pathLength,
          nameConstraints: input.nameConstraints,
          // The URLs the parent's certificates carry, fixed from its first issuance on.
          parent: parent ? { ...parent, ...(await claimUrls(sql, parent, now)) } : null,
        })
        return {
          result: der,
          record: {
            action: target.action,
            keyId: signingKey.keyId,
            keyVersion: signingKey.keyVersion,
            details: { caId: parent?.id ?? id, serial: serial.toString('hex'), certifiesCa: id },
          },
        }
      })
      inserted = await insertOnce(
        () =>
          sql.begin(async (tx) => {
            const created = await insertCa(tx, {
              ...common,
              status: 'active',
              certificate,
              chain: parent ? [parent.certificate!, ...parent.chain] : [],
              csr: null,
              not_before: validity.notBefore,
              not_after: validity.notAfter,
              serial: parent ? serial.toString('hex') : null,
            })
            if (parent) {
              // The parent's record of what it signed: revocable by serial like any certificate.
              await insertCertificate(tx, {
                tenant_id: actor.tenantId,
                serial: serial.toString('hex'),
                ca_id: parent.id,
                role: INTERMEDIATE_ROLE,
                common_name: input.subject.commonName,
                alt_names: { dns: [], ip: [] },
                key_algorithm: key.algorithm,
                der: certificate,
                not_before: validity.notBefore,
                not_after: validity.notAfter,
                revoked_at: null,
                revocation_reason: null,
                created_at: now,
                created_by: actor.actor,
              })
            }
            return created
          }) as Promise<CaRow>,
      )
    }
    return inserted
  }

  return {
    row,

    async constraintsAbove(actor, ca) {
      const chain: Array<NameConstraints | null> = [ca.name_constraints]
      // A chain is at most 11 CAs deep (pathLength ≤ 10 below a root).
      for (let parentId = ca.parent_id; parentId && chain.length <= 11; ) {
        const parent = await getCa(sql, actor.tenantId, parentId)
        if (!parent) break
        chain.push(parent.name_constraints)
        parentId = parent.parent_id
      }
      return chain
    },

    async published(id, what) {
      const ca = await getPublicCa(sql, id)
      const bytes = what === 'crl' ? ca?.crl : ca?.certificate
      if (!bytes) throw what === 'crl' ? notFound('crl_not_found', 'CRL') : caNotFound()
      return bytes
    },

    async refreshCrls(sweepId, limit = 100) {
      const now = clock.now()
      const due = await crlsDue(sql, now, new Date(now.getTime() + CRL_REFRESH_BEFORE_MS), limit)
      let rebuilt = 0
      let failed = 0
      for (const { id, tenant_id } of due) {
        const actor: Actor = { tenantId: tenant_id, actor: sweepId, requestId: null, clientIp: null }
        const ca = await getCa(sql, tenant_id, id)
        if (!ca?.certificate) continue
        try {
          await deps.crls.publish(actor, ca)
          rebuilt++
        } catch {
          // One CA that cannot sign (its key revoked or destroyed, the pool busy) stays stale and
          // is tried at the next sweep; the other tenants' CRLs go on. The count says it failed.
          failed++
        }
      }
      return { rebuilt, failed }
    },

    async create(actor, input, caller) {
      const now = clock.now()
      if (input.type === 'root' && input.parentId)
        throw invalidField('parentId', 'is for intermediates: a root signs itself')
      if (input.keyId) requireKeyWriteForExistingKey(caller.missingForExistingKey)
      // Every refusal that needs no key comes first: nothing is made or reserved for a CA that is
      // then refused (a reserved key signs for its CA alone, for good).
      requireCaKeyAllowed(actor, input.keyId)
      const subjectDer = encodeName(input.subject)
      checkNameConstraintsEncoding(input.nameConstraints)
      const parent = input.parentId ? await activeParent(actor, input.parentId, input.pathLength) : null
      // The caller must be able to sign with the parent's key (its restriction, the key's state).
      const parentKey = parent
        ? await deps.signer.open(actor, {
            keyId: parent.key_id,
            keyVersion: parent.key_version,
            issuer: 'pki',
          })
        : null
      const validity = lifetime(input, parent?.not_after ?? null, now)
      if (await caNameTaken(sql, actor.tenantId, input.name))
        throw new AppError(409, 'ca_exists', `A CA named ${input.name} exists`)
      const id = randomUUID()
      const keyView = await caKey(actor, input, id)
      let inserted: CaRow
      try {
        inserted = await createOnKey(actor, input, {
          id,
          keyView,
          subjectDer,
          parent,
          parentKey,
          validity,
          now,
        })
      } catch (error) {
        // No CA: the key made for it goes, the key it took is given back.
        await (input.keyId
          ? deps.keys.release(actor, keyView.id, 'pki')
          : deps.keys.scheduleDeletion(actor, keyView.id, MIN_DELETION_DAYS)
        ).catch(() => {})
        throw error
      }
      if (inserted.status === 'active') await deps.crls.publish(actor, inserted)
      await audit.record({
        ...actor,
        action: 'pki.ca_create',
        resource: `ca:${id}`,
        outcome: 'success',
        details: {
          type: input.type,
          algorithm: keyView.algorithm,
          keyId: keyView.id,
          status: inserted.status,
        },
      })
      return caView(inserted)
    },

    async list(actor, page) {
      const { rows, total } = await listCas(sql, actor.tenantId, page)
      return { data: rows.map(caView), total }
    },

    async get(actor, id) {
      return caView(await row(actor, id))
    },

    async update(actor, id, input) {
      const ca = await row(actor, id)
      const updated = await updateCa(
        sql,
        actor.tenantId,
        id,
        {
          ...(input.crlDistributionPoints ? { crl_urls: input.crlDistributionPoints } : {}),
          ...(input.issuingCertificateUrls ? { issuer_urls: input.issuingCertificateUrls } : {}),
          ...(input.ocspUrls ? { ocsp_urls: input.ocspUrls } : {}),
          updated_at: clock.now(),
        },
        true,
      )
      if (!updated)
        throw new AppError(
          409,
          'ca_in_use',
          `The CA has issued certificates (the first at ${ca.first_issued_at?.toISOString()}): the URLs they carry can no longer change`,
        )
      await audit.record({ ...actor, action: 'pki.ca_update', resource: `ca:${id}`, outcome: 'success' })
      return caView(updated)
    },

    async importCertificate(actor, id, input) {
      const ca = await row(actor, id)
      if (ca.status !== 'pending')
        throw new AppError(409, 'ca_not_pending', 'The CA already has its certificate')
      const certificate = parsePem(input.certificate, 'certificate')
      const chain = (input.chain ?? []).map((pem, i) => parsePem(pem, `chain[${i}]`))
      const parsed = parseCertificate(certificate)
      const key = await deps.signer.open(actor, {
        keyId: ca.key_id,
        keyVersion: ca.key_version,
        issuer: 'pki',
      })
      if (!parsed.subjectPublicKeyInfo.equals(key.publicKey.export({ type: 'spki', format: 'der' })))
        throw invalidField('certificate', 'does not certify this CA’s key (its CSR’s public key)')
      if (!parsed.basicConstraints?.ca)
        throw invalidField('certificate', 'is not a CA certificate (basicConstraints)')
      const now = clock.now()
      if (parsed.notAfter <= now)
        throw invalidField('certificate', `expired at ${parsed.notAfter.toISOString()}`)
      const x509 = new X509Certificate(certificate)
      if (chain[0]) {
        const issuer = new X509Certificate(chain[0])
        if (!x509.checkIssued(issuer) || !x509.verify(issuer.publicKey))
          throw invalidField('chain', 'chain[0] did not issue the certificate')
      }
      const updated = await updateCa(sql, actor.tenantId, id, {
        status: 'active',
        certificate,
        chain,
        csr: null,
        subject_der: parsed.subject,
        not_before: parsed.notBefore,
        not_after: parsed.notAfter,
        path_length: parsed.basicConstraints.pathLength ?? null,
        updated_at: now,
      })
      await deps.crls.publish(actor, updated!)
      await audit.record({
        ...actor,
        action: 'pki.ca_import_certificate',
        resource: `ca:${id}`,
        outcome: 'success',
      })
      return caView(updated!)
    },
  }
}

async function insertOnce(insert: () => Promise<CaRow>): Promise<CaRow> {
  try {
    return await insert()
  } catch (error) {
    if (isUniqueViolation(error, CA_NAME_CONSTRAINT))
      throw new AppError(409, 'ca_exists', 'A CA of that name exists')
    throw error
  }
}

function parsePem(text: string, field: string): Buffer {
  try {
    const der = fromPem(text, 'CERTIFICATE')
    parseCertificate(der)
    return der
  } catch (error) {
    const message = error instanceof Error ? error.message : 'is malformed'
    throw invalidField(field, `is not a PEM certificate: ${message}`)
  }
}
