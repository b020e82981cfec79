import type { AuditLog } from '../audit/audit-log.ts'
import type { AuditEntry } from '../audit/audit-store.ts'
import type { Actor } from '../auth/request-context.ts'
import { isAliasRef } from '../keys/alias-name.ts'
import { AppError } from '../platform/errors.ts'

/** What an audit record of a cryptographic operation may say: never inputs, outputs or context. */
export interface OperationRecord {
  action: string
  keyId: string | null
  keyVersion: number | null
  details?: NonNullable<AuditEntry['details']>
}

/**
 * What a refusal is recorded against. An operation may fill in the key and version as it learns
 * them (a decryption reads them from the envelope), so its refusals name them.
 */
export interface AuditTarget {
  action: string
  keyId: string | null
  keyVersion?: number | null
}

/**
 * Runs one operation and records it: success once the result exists (the caller is answered
 * only after the record is durable), a refusal (a 4xx AppError) as a failure with its code.
 * Errors that are not refusals (a database outage) propagate unrecorded: the audit log would
 * fail alike. Records name key ids: when the caller named the key by an alias (`attempt.keyId`
 * at the start), the alias goes in the details, and a refusal before the key was found names
 * no resource.
 */
export async function auditedOperation<T>(
  audit: AuditLog,
  actor: Actor,
  attempt: AuditTarget,
  operation: () => Promise<{ result: T; record: OperationRecord }>,
): Promise<T> {
  const alias = isAliasRef(attempt.keyId) ? attempt.keyId : null
  let outcome: { result: T; record: OperationRecord }
  try {
    outcome = await operation()
  } catch (error) {
    if (error instanceof AppError && error.statusCode < 500) {
      await audit.record({
        ...actor,
        action: attempt.action,
        resource: attempt.keyId && !isAliasRef(attempt.keyId) ? `key:${attempt.keyId}` : null,
        keyVersion: attempt.keyVersion ?? null,
        outcome: 'failure',
        details: alias ? { error: error.code, alias } : { error: error.code },
      })
    }
    throw error
  }
  const { result, record } = outcome
  await audit.record({
    ...actor,
    action: record.action,
    resource: record.keyId ? `key:${record.keyId}` : null,
    keyVersion: record.keyVersion,
    outcome: 'success',
    ...(alias
      ? { details: { ...record.details, alias } }
      : record.details
        ? { details: record.details }
        : {}),
  })
  return result
}
