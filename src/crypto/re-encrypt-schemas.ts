import { Type } from 'typebox'
import { nameSchema, Uuid } from '../http/http-schemas.ts'
import { KeyRef } from '../keys/alias-schemas.ts'
import { decodeBase64Field } from '../platform/base64.ts'
import { AppError, invalidField } from '../platform/errors.ts'
import {
  Base64,
  Base64Output,
  base64Length,
  Context,
  compactEnvelope,
  contextBytes,
  DECRYPT_BODY_LIMIT_BYTES,
  DECRYPT_JSON_BODY_LIMIT_BYTES,
  EXAMPLE_ENVELOPE,
  envelopeFromParts,
  envelopeToParts,
  KeyVersion,
  MAX_ENVELOPE_BYTES,
  MAX_WRAP_BYTES,
  WrappedKey,
} from './crypto-schemas.ts'
import type { EncryptionContext } from './encryption-context.ts'
import { toCompact } from './envelope.ts'
import type { ReEncryptInput, ReEncryptResult } from './re-encrypt-service.ts'

/**
 * What a re-encrypt answer adds to an /encrypt (or wrap, or data-key) answer. Decrypt, unwrap and
 * re-encrypt itself accept these two fields and ignore them, so an answer passes back as it came.
 */
export const SourceKeyFields = {
  sourceKeyId: Type.Optional(
    Uuid('From a re-encrypt answer: the key it re-encrypted from (ignored: the envelope names its key)'),
  ),
  sourceKeyVersion: Type.Optional(
    KeyVersion('From a re-encrypt answer: the version it re-encrypted from (ignored)'),
  ),
}

const MODE_VALUES = ['standard', 'legacy'] as const

/**
 * One re-encryption: exactly one of an /encrypt answer (standard or legacy mode, the fields
 * /decrypt takes), a wrap answer (`wrappedKey`) or a data-key answer (`encryptedDek`), passed as
 * it came, with its context and where it goes.
 */
const reEncryptFields = (ciphertextLimit: number) => ({
  ciphertext: Type.Optional(
    Base64('From an /encrypt answer (legacy mode: the whole compact envelope)', ciphertextLimit),
  ),
  encapsulatedKey: Type.Optional(Base64('From an /encrypt answer (standard mode)', 16_384)),
  nonce: Type.Optional(Base64('From an /encrypt answer (standard mode)', 64)),
  tag: Type.Optional(Base64('From an /encrypt answer (standard mode)', 64)),
  mode: Type.Optional(
    Type.Enum(MODE_VALUES, {
      description:
        'The mode of the /encrypt answer given (default standard); the new envelope is answered in the same mode',
    }),
  ),
  wrappedKey: Type.Optional(WrappedKey('From a wrap answer; the new wrapped key is answered as wrappedKey')),
  encryptedDek: Type.Optional(
    WrappedKey('From a data-key answer; the new encrypted data key is answered as encryptedDek'),
  ),
  keyId: Type.Optional(KeyRef('Cross-check: the key the envelope names (the answer given names it so)')),
  keyVersion: Type.Optional(KeyVersion('Cross-check: the key version the envelope names')),
  keyBytes: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_WRAP_BYTES,
      description: 'From a data-key answer: the data key length, checked against the envelope',
    }),
  ),
  plaintextDek: Type.Optional(
    Type.String({
      maxLength: 64,
      description: 'From a data-key answer; ignored (accepted so the answer can be passed as it is)',
    }),
  ),
  ...SourceKeyFields,
  context: Context,
  destinationContext: Context,
})

const DESTINATION_KEY =
  'The key to re-encrypt under (default: the tenant default Encryption key); may be the source key, for its current version'

/** Room for the destination context besides what /decrypt's limit already leaves for one context. */
export const RE_ENCRYPT_BODY_LIMIT_BYTES = DECRYPT_JSON_BODY_LIMIT_BYTES + 64 * 1024

export const ReEncryptBody = Type.Object(
  {
    ...reEncryptFields(base64Length(MAX_ENVELOPE_BYTES)),
    destinationKeyId: Type.Optional(KeyRef(DESTINATION_KEY)),
  },
  {
    $id: 'ReEncryptRequest',
    additionalProperties: false,
    'x-body-limit-bytes': RE_ENCRYPT_BODY_LIMIT_BYTES,
    examples: [
      {
        ...EXAMPLE_ENVELOPE,
        destinationKeyId: 'alias/payments-2026',
        destinationContext: { order: '1042', tenant: 'acme' },
      },
    ],
  },
)

export const ReEncryptBatchItem = Type.Object(
  {
    ...reEncryptFields(DECRYPT_BODY_LIMIT_BYTES),
    destinationKeyId: Type.Optional(KeyRef(`${DESTINATION_KEY}; overrides the batch's destinationKeyId`)),
    // A result of an encrypt or re-encrypt batch passes back as it came: its `ok` is ignored.
    ok: Type.Optional(Type.Literal(true)),
  },
  { additionalProperties: false },
)

/** The answer of /encrypt, wrap or a data-key endpoint, for the destination key, with the source. */
const reEncryptAnswerFields = {
  ciphertext: Type.Optional(
    Base64Output(
      'AES-256-GCM ciphertext, Base64 (legacy mode: the whole compact envelope); /encrypt answers',
    ),
  ),
  encapsulatedKey: Type.Optional(Base64Output('As /encrypt answers it (standard mode)')),
  nonce: Type.Optional(Base64Output('As /encrypt answers it (standard mode)')),
  tag: Type.Optional(Base64Output('As /encrypt answers it (standard mode)')),
  mode: Type.Optional(Type.Literal('legacy')),
  wrappedKey: Type.Optional(Base64Output('For a wrappedKey given: the new wrapped key (compact envelope)')),
  encryptedDek: Type.Optional(
    Base64Output('For an encryptedDek given: the new encrypted data key (compact envelope)'),
  ),
  keyBytes: Type.Optional(Type.Integer({ description: 'For an encryptedDek given: the data key length' })),
  keyId: Uuid('The destination key: the key the new envelope names'),
  keyVersion: Type.Integer({ description: 'The destination key version (also inside the envelope)' }),
  sourceKeyId: Uuid('The key the envelope given was under'),
  sourceKeyVersion: Type.Integer({ description: 'The version the envelope given was under' }),
}

export const ReEncryptResponse = Type.Object(reEncryptAnswerFields)
nameSchema(ReEncryptResponse, 'ReEncryptResponse')

export const ReEncryptBatchResult = Type.Object({ ok: Type.Literal(true), ...reEncryptAnswerFields })

type Fields = {
  ciphertext?: string | undefined
  encapsulatedKey?: string | undefined
  nonce?: string | undefined
  tag?: string | undefined
  mode?: 'standard' | 'legacy' | undefined
  wrappedKey?: string | undefined
  encryptedDek?: string | undefined
  keyId?: string | undefined
  keyVersion?: number | undefined
  keyBytes?: number | undefined
  context?: EncryptionContext
  destinationContext?: EncryptionContext
  destinationKeyId?: string | undefined
}

type WrapField = 'wrappedKey' | 'encryptedDek'

/** What the answer is written as: the /encrypt fields in a mode, or the field the wrapped key came in. */
export type AnswerForm = { kind: 'encrypt'; mode: 'standard' | 'legacy' | undefined } | { kind: WrapField }

const ENCRYPT_FIELDS = ['ciphertext', 'encapsulatedKey', 'nonce', 'tag', 'mode'] as const

function refuse(path: string, field: string, message: string): never {
  throw new AppError(400, 'validation_failed', `${path}/${field} ${message}`, {
    fields: [{ path: `${path}/${field}`, message }],
  })
}

/**
 * The service's input from one request (or batch item) at `path`, and the form of its answer.
 * Throws a 400 naming the field for a body that is none of the three answers, or mixes them.
 */
export function readReEncrypt(
  body: Fields,
  path: string,
  defaults: { mode?: 'standard' | 'legacy' | undefined; destinationKeyId?: string | undefined } = {},
): { input: ReEncryptInput; form: AnswerForm } {
  const wrapFields = (['wrappedKey', 'encryptedDek'] as const).filter((f) => body[f] !== undefined)
  let envelope: ReEncryptInput['source']['envelope']
  let form: AnswerForm
  if (wrapFields.length > 0) {
    if (wrapFields.length > 1) refuse(path, 'encryptedDek', 'must not be given with wrappedKey')
    const field = wrapFields[0]!
    const mixed = ENCRYPT_FIELDS.find((f) => body[f] !== undefined)
    if (mixed) refuse(path, mixed, `is for /encrypt answers: must be absent with ${field}`)
    envelope = compactEnvelope(decodeBase64Field(body[field]!, `${path}/${field}`))
    if (body.keyBytes !== undefined && body.keyBytes !== envelope.ciphertext.length) {
      throw invalidField(
        `${path}/keyBytes`,
        `is ${body.keyBytes}, but the encrypted key holds ${envelope.ciphertext.length} bytes`,
      )
    }
    form = { kind: field }
  } else {
    if (body.ciphertext === undefined) {
      refuse(path, 'ciphertext', 'is required (an /encrypt answer), or wrappedKey or encryptedDek')
    }
    if (body.keyBytes !== undefined) refuse(path, 'keyBytes', 'is for encryptedDek only')
    const mode = body.mode ?? defaults.mode
    envelope = envelopeFromParts(
      {
        mode,
        ciphertext: body.ciphertext,
        encapsulatedKey: body.encapsulatedKey,
        nonce: body.nonce,
        tag: body.tag,
      },
      path,
    )
    form = { kind: 'encrypt', mode }
  }
  const context = contextBytes(body.context, `${path}/context`)
  return {
    input: {
      source: { keyId: body.keyId, keyVersion: body.keyVersion, envelope, context },
      purpose: form.kind === 'encrypt' ? 'encrypt' : 'wrap',
      destinationKeyId: body.destinationKeyId ?? defaults.destinationKeyId,
      destinationContext:
        body.destinationContext === undefined
          ? context
          : contextBytes(body.destinationContext, `${path}/destinationContext`),
    },
    form,
  }
}

/** The answer for the destination key, as /encrypt, wrap or the data-key endpoint would give it. */
export function reEncryptAnswer(result: ReEncryptResult, form: AnswerForm) {
  const keys = {
    keyId: result.keyId,
    keyVersion: result.keyVersion,
    sourceKeyId: result.sourceKeyId,
    sourceKeyVersion: result.sourceKeyVersion,
  }
  if (form.kind === 'encrypt') return { ...envelopeToParts(result, form.mode), ...keys }
  const compact = toCompact(result).toString('base64')
  if (form.kind === 'wrappedKey') return { wrappedKey: compact, ...keys }
  // GCM's ciphertext is as long as its plaintext: the data key's length.
  return { encryptedDek: compact, keyBytes: result.ciphertext.length, ...keys }
}
