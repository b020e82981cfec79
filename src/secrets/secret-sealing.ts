import { createSecretKey, type KeyObject, randomBytes } from 'node:crypto'
import type { Queryable } from '../data/database.ts'
import { open, seal } from '../keyring/aead.ts'
import type { TenantKeks } from '../keyring/tenant-kek.ts'

/**
 * Envelope encryption of a secret's sensitive fields: a data key per secret, sealed by the
 * tenant KEK; each field sealed by the data key. Every AAD names the tenant and the secret (and
 * the field, and for values the version), so a blob copied to another row or field never opens.
 * Re-wrapping a tenant's secrets under a new KEK touches one small blob per secret.
 */
type SealedField = 'notes' | 'custom-values' | 'totp' | `value:${number}`

const dekAad = (tenantId: string, secretId: string) => `kms:secret-dek:v1:${tenantId}:${secretId}`
const fieldAad = (tenantId: string, secretId: string, field: SealedField) =>
  `kms:secret-field:v1:${tenantId}:${secretId}:${field}`

export interface SecretDataKey {
  seal(field: SealedField, plaintext: Uint8Array): Buffer
  open(field: SealedField, blob: Uint8Array): Buffer
}

export interface SecretSealing {
  /** A fresh data key for a new secret, and its sealed form to store. */
  create(
    tenantId: string,
    secretId: string,
    db?: Queryable,
  ): Promise<{ key: SecretDataKey; sealedDek: Buffer }>
  /** The data key of a stored secret. */
  open(tenantId: string, secretId: string, sealedDek: Buffer, db?: Queryable): Promise<SecretDataKey>
}

function dataKey(tenantId: string, secretId: string, key: KeyObject): SecretDataKey {
  return {
    seal: (field, plaintext) => seal(key, plaintext, fieldAad(tenantId, secretId, field)),
    open: (field, blob) => open(key, blob, fieldAad(tenantId, secretId, field)),
  }
}

export function createSecretSealing(tenantKeks: TenantKeks): SecretSealing {
  return {
    async create(tenantId, secretId, db) {
      const raw = randomBytes(32)
      try {
        const sealedDek = await tenantKeks.seal(tenantId, raw, dekAad(tenantId, secretId), db)
        return { key: dataKey(tenantId, secretId, createSecretKey(raw)), sealedDek }
      } finally {
        raw.fill(0)
      }
    },
    async open(tenantId, secretId, sealedDek, db) {
      const raw = await tenantKeks.open(tenantId, sealedDek, dekAad(tenantId, secretId), db)
      try {
        return dataKey(tenantId, secretId, createSecretKey(raw))
      } finally {
        raw.fill(0)
      }
    },
  }
}
