import { randomUUID } from 'node:crypto'
import type { Static } from 'typebox'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import { type IssuerSigner, requireSignAllowed } from '../crypto/issuer-signer.ts'
import type { Queryable, Sql } from '../data/database.ts'
import { type AlgorithmName, algorithmByName } from '../keys/algorithms.ts'
import { type KeyService, requireIssuerKey, requireKeyWriteForExistingKey } from '../keys/key-service.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, invalidField, isUniqueViolation, notFound } from '../platform/errors.ts'
import { type CertType, signatureAlgorithmOf } from './ssh-certificate.ts'
import { buildKrl } from './ssh-krl.ts'
import { checkValiditySettings, VALIDITY_LIMITS } from './ssh-policy.ts'
import {
  type CreateSshCaBody,
  SSH_CA_ALGORITHMS,
  type SshCaAlgorithm,
  type SshCaSchema,
  type UpdateSshCaBody,
} from './ssh-schemas.ts'
import {
  CA_TYPE_CONSTRAINT,
  findCa,
  findCaOfType,
  findPublishedCa,
  insertCa,
  listCas,
  lockCa,
  revokedSerials,
  type SshCaRow,
  updateCa,
} from './ssh-store.ts'
import { publicKeyLine, type SshPublicKey, SshReader, sshFingerprint, sshPublicKeyOf } from './ssh-wire.ts'

type SshCaView = Static<typeof SshCaSchema>

export interface SshCaService {
  /** `caller.missingForExistingKey`: the scopes a CA on `keyId` needs besides ssh:write. */
  create(
    actor: Actor,
    body: CreateSshCaBody,
    caller: { missingForExistingKey: readonly string[] },
  ): Promise<SshCaView>
  list(actor: Actor): Promise<SshCaView[]>
  get(actor: Actor, id: string): Promise<SshCaView>
  update(actor: Actor, id: string, body: UpdateSshCaBody): Promise<SshCaView>
  /** The CA's public key line (public: no credential, no tenant). */
  publicKey(id: string): Promise<string>
  /** The CA's KRL now (public: no credential, no tenant). */
  krl(id: string): Promise<Buffer>
}

export const sshCaNotFound = () => notFound('ssh_ca_not_found', 'SSH CA')

const caExists = (type: CertType) =>
  new AppError(409, 'ssh_ca_exists', `The tenant already has an SSH ${type} CA`, { type })

/** The key a CA signs with, as the CA pins it. */
interface CaKey {
  keyId: string
  keyVersion: number
  algorithm: SshCaAlgorithm
  publicKey: SshPublicKey
  /** Generated for this CA (scheduled for deletion if the CA cannot be stored). */
  generated: boolean
}

/** The comment of the CA's public key line: which CA of the service it is. */
const caComment = (row: Pick<SshCaRow, 'id' | 'ca_type'>) => `kms-ssh-${row.ca_type}-ca-${row.id}`

function caView(row: SshCaRow): SshCaView {
  const keyType = new SshReader(row.public_key).text()
  const bare = publicKeyLine(keyType, row.public_key)
  return {
    id: row.id,
    type: row.ca_type,
    keyId: row.key_id,
    keyVersion: row.key_version,
    algorithm: row.algorithm as SshCaAlgorithm,
    signatureAlgorithm: signatureAlgorithmOf(algorithmByName(row.algorithm as AlgorithmName).spec),
    publicKey: publicKeyLine(keyType, row.public_key, caComment(row)),
    fingerprint: sshFingerprint(row.public_key),
    authorizedKeysLine: row.ca_type === 'user' ? `cert-authority ${bare}` : null,
    knownHostsLine: row.ca_type === 'host' ? `@cert-authority * ${bare}` : null,
    defaultValiditySeconds: row.default_validity_seconds,
    maxValiditySeconds: row.max_validity_seconds,
    publicKeyUrl: `/api/v1/ssh/ca/${row.id}/public-key`,
    krlUrl: `/api/v1/ssh/ca/${row.id}/krl`,
    createdAt: row.created_at.toISOString(),
    createdBy: row.created_by,
    updatedAt: row.updated_at.toISOString(),
    updatedBy: row.updated_by,
  }
}

export function createSshCaService(deps: {
  sql: Sql
  audit: AuditLog
  keys: Pick<KeyService, 'create' | 'get' | 'reserve' | 'release' | 'scheduleDeletion'>
  signer: IssuerSigner
  clock: Clock
}): SshCaService {
  const { sql, audit, clock } = deps

  const record = (
    tx: Queryable,
    actor: Actor,
    action: string,
    id: string,
    details: Record<string, string | number | boolean | null>,
  ) =>
    audit.recordInTransaction(tx, { ...actor, action, resource: `ssh-ca:${id}`, outcome: 'success', details })

  /**
   * An existing key of the tenant the caller may sign with, fit to be a CA key; reserved for the
   * SSH CAs from now on (no /sign of a hand-made certificate with it), its current version pinned.
   */
  async function existingKey(actor: Actor, keyId: string): Promise<CaKey> {
    const field = 'body/keyId'
    requireSignAllowed(actor)
    // 404 for another tenant's key, 403 for a key outside the caller's API-key restriction.
    const key = await deps.keys.get(actor, keyId)
    // OpenSSH certificates have no signature of the other algorithms (no post-quantum type).
    requireIssuerKey(key, SSH_CA_ALGORITHMS, field)
    // 409 key_reserved when it already signs for a CA (the other SSH CA's key, or an X.509 CA's).
    await deps.keys.reserve(actor, key.id, 'ssh')
    const opened = await deps.signer.open(actor, { keyId: key.id, issuer: 'ssh' })
    return {
      keyId: opened.keyId,
      keyVersion: opened.keyVersion,
      algorithm: key.algorithm,
      publicKey: sshPublicKeyOf(opened.publicKey),
      generated: false,
    }
  }

  /** A new non-exportable Signing key for the CA, reserved for it, named and labelled after it. */
  async function newKey(
    actor: Actor,
    caId: string,
    type: CertType,
    algorithm: SshCaAlgorithm,
  ): Promise<CaKey> {
    // The new key would be outside a restricted API key's list: it could never sign with it.
    if (actor.keyRestriction?.keys)
      throw new AppError(
        403,
        'key_not_allowed',
        'This API key is restricted to keys: a key generated for the CA would be outside its list; pass keyId of a key in it',
      )
    requireSignAllowed(actor)
    const created = await deps.keys.create(
      actor,
      {
        name: `ssh-${type}-ca-${caId.slice(0, 8)}`,
        keyType: 'Signing',
        algorithm,
        exportable: false,
        reservedFor: 'ssh',
        labels: ['ssh-ca', `ssh-${type}-ca`],
        description: `Signs the certificates of the SSH ${type} CA ${caId}`,
      },
      { missingForDefault: [] },
    )
    const opened = await deps.signer.open(actor, {
      keyId: created.id,
      keyVersion: created.version,
      issuer: 'ssh',
    })
    return {
      keyId: created.id,
      keyVersion: opened.keyVersion,
      algorithm,
      publicKey: sshPublicKeyOf(opened.publicKey),
      generated: true,
    }
  }

  async function requireCa(actor: Actor, id: string, db: Queryable = sql): Promise<SshCaRow> {
    const row = await findCa(db, actor.tenantId, id)
    if (!row) throw sshCaNotFound()
    return row
  }

  async function requirePublished(id: string): Promise<SshCaRow> {
    const row = await findPublishedCa(sql, id)
    if (!row) throw sshCaNotFound()
    return row
  }

  return {
    async create(actor, body, caller) {
      const { type } = body
      const limits = VALIDITY_LIMITS[type]
      const maxValiditySeconds = body.maxValiditySeconds ?? limits.max
      const settings = {
        maxValiditySeconds,
        defaultValiditySeconds: body.defaultValiditySeconds ?? Math.min(limits.default, maxValiditySeconds),
      }
      checkValiditySettings(type, settings, 'body')
      if (body.keyId !== undefined && body.algorithm !== undefined)
        throw invalidField(
          'body/algorithm',
          'must be omitted with keyId: the CA signs with the key’s own algorithm',
        )
      if (body.keyId !== undefined) requireKeyWriteForExistingKey(caller.missingForExistingKey)
      if (await findCaOfType(sql, actor.tenantId, type)) throw caExists(type)
      const id = randomUUID()
      const key =
        body.keyId !== undefined
          ? await existingKey(actor, body.keyId)
          : await newKey(actor, id, type, body.algorithm ?? 'Ed25519')
      const now = clock.now()
      const row: SshCaRow = {
        id,
        tenant_id: actor.tenantId,
        ca_type: type,
        key_id: key.keyId,
        key_version: key.keyVersion,
        algorithm: key.algorithm,
        public_key: key.publicKey.blob,
        default_validity_seconds: settings.defaultValiditySeconds,
        max_validity_seconds: settings.maxValiditySeconds,
        created_at: now,
        created_by: actor.actor,
        updated_at: now,
        updated_by: actor.actor,
      }
      try {
        await sql.begin(async (tx) => {
          await insertCa(tx, row)
          await record(tx, actor, 'ssh.ca_create', id, {
            type,
            keyId: key.keyId,
            keyVersion: key.keyVersion,
            algorithm: key.algorithm,
            generatedKey: key.generated,
          })
        })
      } catch (error) {
        // No CA: the key made for it goes, the key it took is given back (another request made
        // the tenant's CA of this type meanwhile, or the database refused).
        await (key.generated
          ? deps.keys.scheduleDeletion(actor, key.keyId, 7)
          : deps.keys.release(actor, key.keyId, 'ssh')
        ).catch(() => {})
        if (!isUniqueViolation(error, CA_TYPE_CONSTRAINT)) throw error
        throw caExists(type)
      }
      return caView(row)
    },

    async list(actor) {
      return (await listCas(sql, actor.tenantId)).map(caView)
    },

    async get(actor, id) {
      return caView(await requireCa(actor, id))
    },

    async update(actor, id, body) {
      return sql.begin(async (tx) => {
        const current = await lockCa(tx, actor.tenantId, id)
        if (!current) throw sshCaNotFound()
        const settings = {
          defaultValiditySeconds: body.defaultValiditySeconds ?? current.default_validity_seconds,
          maxValiditySeconds: body.maxValiditySeconds ?? current.max_validity_seconds,
        }
        checkValiditySettings(current.ca_type, settings, 'body')
        const row = await updateCa(tx, id, {
          default_validity_seconds: settings.defaultValiditySeconds,
          max_validity_seconds: settings.maxValiditySeconds,
          updated_at: clock.now(),
          updated_by: actor.actor,
        })
        await record(tx, actor, 'ssh.ca_update', id, { ...settings })
        return caView(row)
      })
    },

    async publicKey(id) {
      const row = await requirePublished(id)
      return `${publicKeyLine(new SshReader(row.public_key).text(), row.public_key, caComment(row))}\n`
    },

    async krl(id) {
      const row = await requirePublished(id)
      const now = clock.now()
      const seconds = BigInt(Math.floor(now.getTime() / 1000))
      return buildKrl({
        caKey: row.public_key,
        serials: await revokedSerials(sql, id, now),
        // The generation time: a later list never has a lower version.
        version: seconds,
        generatedAt: now,
        comment: caComment(row),
      })
    },
  }
}
