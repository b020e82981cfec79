import { AppError } from '../platform/errors.ts'

/** Spec section 3. */
export const KEY_STATES = ['Active', 'Expired', 'Revoked', 'Pending Deletion', 'Destroyed'] as const
export type KeyState = (typeof KEY_STATES)[number]

export interface LifecycleFields {
  expires_at: Date | null
  revoked_at: Date | null
  scheduled_deletion_date: Date | null
  destroyed_at: Date | null
}

/**
 * The state at `now`, from the stored timestamps alone: time-driven transitions hold without
 * any job having run. Precedence follows the spec: destruction beats a pending deletion, which
 * beats revocation, which beats expiry.
 */
export function keyState(key: LifecycleFields, now: Date): KeyState {
  const t = now.getTime()
  if (key.destroyed_at) return 'Destroyed'
  if (key.scheduled_deletion_date) {
    return key.scheduled_deletion_date.getTime() <= t ? 'Destroyed' : 'Pending Deletion'
  }
  if (key.revoked_at) return 'Revoked'
  if (key.expires_at && key.expires_at.getTime() <= t) return 'Expired'
  return 'Active'
}

/** Spec section 3's capability table: states that may encrypt (sign, wrap), and decrypt (verify, unwrap). */
export const ENCRYPT_STATES: readonly KeyState[] = ['Active']
export const DECRYPT_STATES: readonly KeyState[] = ['Active', 'Expired', 'Revoked', 'Pending Deletion']

export function stateConflict(state: KeyState, operation: string): AppError {
  return new AppError(409, 'key_state_conflict', `A key in state ${state} cannot be used to ${operation}`, {
    state,
  })
}

/** Refuses the operation unless the key is in one of `allowed`. */
export function requireState(state: KeyState, allowed: readonly KeyState[], operation: string): void {
  if (!allowed.includes(state)) throw stateConflict(state, operation)
}
