import type { AuditLog } from '../audit/audit-log.ts'
import type { AuditEntry } from '../audit/audit-store.ts'
import type { Actor } from '../auth/request-context.ts'
import { AppError } from '../platform/errors.ts'

/** What an audit record of a cryptographic operation may say: never inputs, outputs or context. */
export interface OperationRecord {
  action: string
  keyId: string | null
  keyVersion: number | null
  details?: NonNullable<AuditEntry['details']>
}

/**
 * Runs one operation and records it: success once the result exists (the caller is answered
 * only after the record is durable), failure with the refusal's error code. Errors that are not
 * refusals (a database outage) propagate unrecorded: the audit log would fail alike.
 */
export async function auditedOperation<T>(
  audit: AuditLog,
  actor: Actor,
  attempt: { action: string; keyId: string | null },
  operation: () => Promise<{ result: T; record: OperationRecord }>,
): Promise<T> {
  let outcome: { result: T; record: OperationRecord }
  try {
    outcome = await operation()
  } catch (error) {
    if (error instanceof AppError && error.statusCode < 500) {
      await audit.record({
        ...actor,
        action: attempt.action,
        resource: attempt.keyId ? `key:${attempt.keyId}` : null,
        keyVersion: null,
        outcome: 'failure',
        details: { error: error.code },
      })
    }
    throw error
  }
  const { record } = outcome
  await audit.record({
    ...actor,
    action: record.action,
    resource: record.keyId ? `key:${record.keyId}` : null,
    keyVersion: record.keyVersion,
    outcome: 'success',
    ...(record.details ? { details: record.details } : {}),
  })
  return outcome.result
}
