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

/** Runs a step of an operation; a refusal (a 4xx AppError) is recorded as a failure with its code. */
export async function auditRefusals<T>(
  audit: AuditLog,
  actor: Actor,
  attempt: { action: string; keyId: string | null },
  step: () => Promise<T>,
): Promise<T> {
  try {
    return await step()
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
    // Errors that are not refusals (a database outage) propagate unrecorded: the audit log
    // would fail alike.
    throw error
  }
}

/**
 * Runs one operation and records it: success once the result exists (the caller is answered
 * only after the record is durable), failure with the refusal's error code.
 */
export async function auditedOperation<T>(
  audit: AuditLog,
  actor: Actor,
  attempt: { action: string; keyId: string | null },
  operation: () => Promise<{ result: T; record: OperationRecord }>,
): Promise<T> {
  const { result, record } = await auditRefusals(audit, actor, attempt, operation)
  await audit.record({
    ...actor,
    action: record.action,
    resource: record.keyId ? `key:${record.keyId}` : null,
    keyVersion: record.keyVersion,
    outcome: 'success',
    ...(record.details ? { details: record.details } : {}),
  })
  return result
}
