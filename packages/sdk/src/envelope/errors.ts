/** The decrypt errors of the message format (docs/sdk-message-format.md), plus encrypt's own. */
export type EnvelopeErrorCode =
  | 'malformed_header'
  | 'unsupported_version'
  | 'unsupported_algorithm'
  | 'too_many_encrypted_data_keys'
  | 'no_decryptable_data_key'
  | 'commitment_mismatch'
  | 'header_authentication_failed'
  | 'frame_authentication_failed'
  | 'frame_out_of_order'
  | 'truncated'
  | 'trailing_data'
  | 'context_mismatch'

/**
 * Why one encrypted data key could not be decrypted: the wrapping key and the service's answer,
 * never key material.
 */
export interface DataKeyFailure {
  providerId: string
  /** The wrapping key's id. */
  providerInfo: string
  /** The service's status and code (e.g. 403 insufficient_scope, 400 decryption_failed), or the keyring's reason. */
  status?: number
  code: string
  message: string
}

interface EnvelopeErrorDetails {
  /** no_decryptable_data_key: each encrypted data key tried or skipped, and why. */
  reasons?: readonly DataKeyFailure[]
  /** frame_authentication_failed, frame_out_of_order: the frame's sequence number as found. */
  sequenceNumber?: number
  /** frame_out_of_order: the one due. */
  expectedSequenceNumber?: number
}

export class EnvelopeError extends Error {
  override readonly name = 'EnvelopeError'
  readonly code: EnvelopeErrorCode
  readonly reasons: readonly DataKeyFailure[]
  readonly sequenceNumber: number | undefined
  readonly expectedSequenceNumber: number | undefined

  constructor(code: EnvelopeErrorCode, message: string, details: EnvelopeErrorDetails = {}) {
    super(message)
    this.code = code
    this.reasons = details.reasons ?? []
    this.sequenceNumber = details.sequenceNumber
    this.expectedSequenceNumber = details.expectedSequenceNumber
  }
}
