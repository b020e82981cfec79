/** Why a fetch from a quantum source did not complete: the source never gave a usable answer. */
export const FAILURE_REASONS = [
  'network',
  'timeout',
  'redirect',
  'unauthorized',
  'rate_limited',
  'server_error',
  'http_status',
  'unexpected',
] as const
export type FailureReason = (typeof FAILURE_REASONS)[number]

/** Why an answer that did arrive was refused: its content breaks the protocol or looks non-random. */
export const REJECTION_REASONS = [
  'invalid_json',
  'not_success',
  'wrong_type',
  'invalid_data',
  'short',
  'oversized',
  'length_mismatch',
  'invalid_base64',
  'block_size',
  'size_mismatch',
  'all_zero',
  'constant',
  'repeated',
] as const
export type RejectionReason = (typeof REJECTION_REASONS)[number]

/**
 * The message is the reason code alone: it ends up in logs, so it must never carry response
 * bytes, URLs or credentials.
 */
export abstract class EntropySourceError extends Error {
  abstract readonly kind: 'failure' | 'rejection'
  abstract readonly reason: FailureReason | RejectionReason
}

export class EntropyFetchFailure extends EntropySourceError {
  readonly kind = 'failure'
  readonly reason: FailureReason

  constructor(reason: FailureReason) {
    super(`entropy fetch failed: ${reason}`)
    this.name = 'EntropyFetchFailure'
    this.reason = reason
  }
}

export class EntropyRejection extends EntropySourceError {
  readonly kind = 'rejection'
  readonly reason: RejectionReason

  constructor(reason: RejectionReason) {
    super(`entropy response rejected: ${reason}`)
    this.name = 'EntropyRejection'
    this.reason = reason
  }
}

export const failure = (reason: FailureReason) => new EntropyFetchFailure(reason)
export const rejection = (reason: RejectionReason) => new EntropyRejection(reason)
