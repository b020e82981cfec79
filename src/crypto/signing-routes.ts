import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { type DataRoute, dataRoute } from '../http/data-route.ts'
import { errorResponses, nameSchema, Uuid } from '../http/http-schemas.ts'
import { KeyRef } from '../keys/alias-schemas.ts'
import { decodeBase64Field } from '../platform/base64.ts'
import { invalidField } from '../platform/errors.ts'
import { Base64, Base64Output, base64Length, KeyIdParams, KeyVersion } from './crypto-schemas.ts'
import { MAX_SIGNATURE_CONTEXT_BYTES, MIN_MAC_BYTES, type SignatureOptions } from './signing.ts'
import type { SigningService } from './signing-service.ts'

const TAGS = ['Signatures and MACs']
/** Messages to sign travel in the default body; larger documents are signed as a digest. */
const MAX_MESSAGE_BASE64 = 1024 * 1024

const SchemeOptions = {
  messageType: Type.Optional(
    Type.Enum(['RAW', 'DIGEST'], {
      default: 'RAW',
      description:
        'RAW: message is the data itself. DIGEST: message is its hash (SHA-256 for RSA; SHA-256/384/512 for EC P-256/384/521); RSA and ECDSA only',
    }),
  ),
  rsaPadding: Type.Optional(
    // No schema default: verify must tell an option the caller gave from one a signingScheme implies.
    Type.Enum(['PSS', 'PKCS1'], {
      description:
        'RSA keys: RSASSA-PSS (SHA-256, MGF1-SHA-256, 32-byte salt) or RSASSA-PKCS1-v1_5 with SHA-256 (default: PSS)',
    }),
  ),
  signatureFormat: Type.Optional(
    Type.Enum(['DER', 'P1363'], {
      description: 'ECDSA keys: DER-encoded (r, s), or IEEE P1363 fixed-length r || s (default: DER)',
    }),
  ),
  saltLength: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 478,
      description:
        'RSA-PSS salt length in bytes (default 32, the SHA-256 length); verify accepts only this length. At most the key allows: 222 for RSA-2048, 350 for RSA-3072, 478 for RSA-4096',
    }),
  ),
}

/**
 * Room for a context of up to 258 bytes (the Base64 of 256 to 258 bytes is 344 characters): a
 * context one byte too long reaches the service's check, whose message names the 255-byte limit.
 */
const SignatureContext = Type.Optional(
  Base64(
    'ML-DSA and SLH-DSA keys: the context string (FIPS 204 §5.2, FIPS 205 §10.2), 0 to 255 bytes, Base64; ' +
      'verify needs the same one. Absent: the empty context. Other algorithms: 400',
    base64Length(MAX_SIGNATURE_CONTEXT_BYTES + 1),
  ),
)

const Message = Base64('The message (or its digest), Base64', MAX_MESSAGE_BASE64)

/** Versioned signatures: `kms:v<version>:<Base64>` (as Vault's `vault:v1:`). */
const VERSIONED_PREFIX = 'kms:v'
const MAX_KEY_VERSION = 2_147_483_647
/** The longest prefix: `kms:v2147483647:`. */
const MAX_PREFIX_CHARS = VERSIONED_PREFIX.length + 10 + 1
const MAX_SIGNATURE_BASE64 = 65_536

const versionedSignature = (version: number, signature: Buffer) =>
  `${VERSIONED_PREFIX}${version}:${signature.toString('base64')}`

/**
 * A signature as verify takes it: standard Base64, or the versioned form, whose version is
 * returned. A plain signature cannot start with `kms:` (`:` is not a Base64 character), so the
 * two never mix.
 */
function parseSignature(text: string): { signature: Buffer; version: number | undefined } {
  if (!text.startsWith('kms:'))
    return { signature: decodeBase64Field(text, 'body/signature'), version: undefined }
  const end = text.indexOf(':', VERSIONED_PREFIX.length)
  const digits = end < 0 ? '' : text.slice(VERSIONED_PREFIX.length, end)
  if (
    !text.startsWith(VERSIONED_PREFIX) ||
    !/^[1-9][0-9]{0,9}$/.test(digits) ||
    Number(digits) > MAX_KEY_VERSION
  ) {
    throw invalidField(
      'body/signature',
      `starts with kms: but is not a versioned signature kms:v<version>:<Base64> (version 1 to ${MAX_KEY_VERSION})`,
    )
  }
  return { signature: decodeBase64Field(text.slice(end + 1), 'body/signature'), version: Number(digits) }
}

const SignBody = Type.Object(
  {
    keyId: Type.Optional(KeyRef('Signing key (default: the tenant default Signing key)')),
    message: Message,
    ...SchemeOptions,
    signatureContext: SignatureContext,
    signatureEncoding: Type.Optional(
      Type.Enum(['plain', 'versioned'], {
        default: 'plain',
        description:
          'plain: the signature as Base64. versioned: kms:v<keyVersion>:<Base64>, a signature that names the key ' +
          "version that made it, so verify needs no keyVersion after a rotation (as Vault's vault:v1:)",
      }),
    ),
  },
  {
    $id: 'SignRequest',
    additionalProperties: false,
    // One example per body: @fastify/swagger turns several into a map that openapi.ts does not read.
    examples: [{ message: 'SGVsbG8sIHdvcmxkIQ==', signatureEncoding: 'versioned' }],
  },
)

const SignResponse = Type.Object({
  signature: Base64Output('Base64; with signatureEncoding versioned, kms:v<keyVersion>:<Base64>'),
  keyId: Uuid('The key that signed'),
  keyVersion: Type.Integer({
    description: 'The version that signed: pass it to verify once the key has rotated',
  }),
  algorithm: Type.String({ description: 'The key algorithm' }),
  signingScheme: Type.String({ description: 'The signature scheme used, e.g. RSASSA-PSS-SHA256' }),
})
nameSchema(SignResponse, 'SignResponse')

/** What sign and mac answered describes the key; passed back as it is, it is accepted. */
const AnsweredAlgorithm = Type.Optional(
  Type.String({ maxLength: 64, description: 'From the sign or mac answer; informational (the key decides)' }),
)

const VerifyBody = Type.Object(
  {
    keyId: Type.Optional(KeyRef('Signing key (default: the tenant default Signing key)')),
    keyVersion: Type.Optional(
      KeyVersion(
        'The version that signed. Absent: the version a versioned signature names; for a plain signature, ' +
          'every version of the key, newest first (the 100 most recent), the answer naming the one that matched',
      ),
    ),
    message: Message,
    signature: Type.String({
      maxLength: MAX_PREFIX_CHARS + MAX_SIGNATURE_BASE64,
      description:
        'The signature: Base64, or the versioned form kms:v<keyVersion>:<Base64> that sign answers',
    }),
    ...SchemeOptions,
    signatureContext: SignatureContext,
    algorithm: AnsweredAlgorithm,
    signingScheme: Type.Optional(
      Type.String({
        maxLength: 64,
        description:
          'From the sign answer: sets rsaPadding (RSASSA-PSS / RSASSA-PKCS1-v1_5) and signatureFormat (ECDSA-...-DER / -P1363) when they are absent',
      }),
    ),
  },
  {
    $id: 'VerifyRequest',
    additionalProperties: false,
    examples: [
      {
        keyId: '3f0c9a8e-5b1d-4c2a-9e7f-1a2b3c4d5e6f',
        message: 'SGVsbG8sIHdvcmxkIQ==',
        signature:
          'kms:v1:yk/ZjmEuzq5u4SEMlzriVPsJAPK+la7mhyPabJcdfuZPoGRqb1JHpV7XUy4XEqChoh+Rhzyt2Tz+dM8MVqLTIg==',
      },
    ],
  },
)

const VerifyResponse = Type.Object({
  valid: Type.Boolean(),
  keyId: Uuid('The key used'),
  keyVersion: Type.Integer({
    description:
      'The version used: the one named (keyVersion or a versioned signature), else the one that matched; when none did, the current version',
  }),
})
nameSchema(VerifyResponse, 'VerifyResponse')

/** RFC 2104 section 5: a MAC may be truncated to its leftmost bytes, never below half the output or 16 bytes. */
const MacLength = Type.Optional(
  Type.Integer({
    minimum: MIN_MAC_BYTES,
    maximum: 64,
    description:
      'Truncate the MAC to its leftmost macLength bytes (RFC 2104 §5): 16 up to the full length (32, 48 or 64 for HMAC-SHA256/384/512). Absent: the full MAC. Verify compares that many bytes',
  }),
)

const MacBody = Type.Object(
  { data: Message, macLength: MacLength },
  {
    $id: 'MacRequest',
    additionalProperties: false,
    examples: [{ data: 'SGVsbG8sIHdvcmxkIQ==' }],
  },
)
const MacResponse = Type.Object({
  mac: Base64Output('Base64'),
  keyId: Uuid('The HMAC key'),
  keyVersion: Type.Integer({
    description: 'The version that computed the MAC: pass it to verify after a rotation',
  }),
  algorithm: Type.String(),
})
nameSchema(MacResponse, 'MacResponse')
const MacVerifyBody = Type.Object(
  {
    data: Message,
    mac: Base64('The MAC, Base64', 1024),
    keyVersion: Type.Optional(
      KeyVersion(
        'The version that computed the MAC. Absent: every version of the key, newest first (the 100 most recent), the answer naming the one that matched',
      ),
    ),
    keyId: Type.Optional(KeyRef('From the mac answer: must be the key of the path')),
    algorithm: AnsweredAlgorithm,
    macLength: MacLength,
  },
  {
    $id: 'MacVerifyRequest',
    additionalProperties: false,
    examples: [
      { data: 'SGVsbG8sIHdvcmxkIQ==', mac: 'RBSNsqbVjEGUYY16TMtnXh+0GSQlQpGhtnOIDeEh/4M=', keyVersion: 1 },
    ],
  },
)

/**
 * The options a sign answer's signingScheme stands for, merged under the ones the request
 * names; a contradiction is a 400 rather than a verification that quietly fails.
 */
function withScheme<
  T extends { rsaPadding?: 'PSS' | 'PKCS1' | undefined; signatureFormat?: 'DER' | 'P1363' | undefined },
>(body: T & { signingScheme?: string | undefined }): T {
  const scheme = body.signingScheme
  if (scheme === undefined) return body
  const implied: { rsaPadding?: 'PSS' | 'PKCS1'; signatureFormat?: 'DER' | 'P1363' } = {}
  if (scheme.startsWith('RSASSA-PSS-')) implied.rsaPadding = 'PSS'
  else if (scheme.startsWith('RSASSA-PKCS1-')) implied.rsaPadding = 'PKCS1'
  else if (scheme.startsWith('ECDSA-')) implied.signatureFormat = scheme.endsWith('-P1363') ? 'P1363' : 'DER'
  for (const option of ['rsaPadding', 'signatureFormat'] as const) {
    const given = body[option]
    if (given !== undefined && implied[option] !== undefined && given !== implied[option]) {
      throw invalidField(`body/${option}`, `is ${given}, but signingScheme ${scheme} uses ${implied[option]}`)
    }
  }
  return { ...implied, ...body }
}

function optionsOf(body: {
  messageType?: 'RAW' | 'DIGEST' | undefined
  rsaPadding?: 'PSS' | 'PKCS1' | undefined
  signatureFormat?: 'DER' | 'P1363' | undefined
  saltLength?: number | undefined
  signatureContext?: string | undefined
}): SignatureOptions {
  return {
    messageType: body.messageType ?? 'RAW',
    rsaPadding: body.rsaPadding ?? 'PSS',
    signatureFormat: body.signatureFormat ?? 'DER',
    saltLength: body.saltLength,
    context:
      body.signatureContext === undefined
        ? undefined
        : decodeBase64Field(body.signatureContext, 'body/signatureContext'),
  }
}

export function signingRoutes(signing: SigningService): DataRoute[] {
  return [
    dataRoute({
      method: 'POST',
      url: '/sign',
      access: access.scope('encryption:write'),
      schema: {
        tags: TAGS,
        summary: 'Sign with a Signing key (ML-DSA, SLH-DSA, RSA, ECDSA, Ed25519)',
        operationId: 'sign',
        body: SignBody,
        response: { 200: SignResponse, ...errorResponses(403, 404, 409, 503) },
      },
      handler: async (request) => {
        const result = await signing.sign(actorOf(request), {
          keyId: request.body.keyId,
          message: decodeBase64Field(request.body.message, 'body/message'),
          options: optionsOf(request.body),
        })
        const signature =
          request.body.signatureEncoding === 'versioned'
            ? versionedSignature(result.keyVersion, result.signature)
            : result.signature.toString('base64')
        return { ...result, signature }
      },
    }),

    dataRoute({
      method: 'POST',
      url: '/verify',
      access: access.scope('encryption:write'),
      schema: {
        tags: TAGS,
        summary: 'Verify a signature: {valid: true|false} (200) whatever the signature holds',
        operationId: 'verify',
        body: VerifyBody,
        response: { 200: VerifyResponse, ...errorResponses(403, 404, 409, 503) },
      },
      handler: async (request) => {
        const { signature, version } = parseSignature(request.body.signature)
        const keyVersion = request.body.keyVersion
        if (version !== undefined && keyVersion !== undefined && keyVersion !== version) {
          throw invalidField(
            'body/keyVersion',
            `is ${keyVersion}, but the signature names version ${version}`,
          )
        }
        return signing.verify(actorOf(request), {
          keyId: request.body.keyId,
          keyVersion: keyVersion ?? version,
          message: decodeBase64Field(request.body.message, 'body/message'),
          signature,
          options: optionsOf(withScheme(request.body)),
        })
      },
    }),

    dataRoute({
      method: 'POST',
      url: '/keys/:keyId/mac',
      access: access.scope('encryption:write'),
      schema: {
        tags: TAGS,
        summary: 'HMAC of the data with an HMAC key',
        operationId: 'generateMac',
        params: KeyIdParams,
        body: MacBody,
        response: { 200: MacResponse, ...errorResponses(403, 404, 409) },
      },
      handler: async (request) => {
        const result = await signing.mac(actorOf(request), {
          keyId: request.params.keyId,
          data: decodeBase64Field(request.body.data, 'body/data'),
          macLength: request.body.macLength,
        })
        return { ...result, mac: result.mac.toString('base64') }
      },
    }),

    dataRoute({
      method: 'POST',
      url: '/keys/:keyId/mac/verify',
      access: access.scope('encryption:write'),
      schema: {
        tags: TAGS,
        summary: 'Check a MAC in constant time: {valid: true|false}',
        operationId: 'verifyMac',
        params: KeyIdParams,
        body: MacVerifyBody,
        response: { 200: VerifyResponse, ...errorResponses(403, 404, 409) },
      },
      handler: async (request) => {
        return signing.verifyMac(actorOf(request), {
          keyId: request.params.keyId,
          // Compared with the path's key once both are resolved (either may be an alias): 400.
          bodyKeyId: request.body.keyId,
          keyVersion: request.body.keyVersion,
          data: decodeBase64Field(request.body.data, 'body/data'),
          mac: decodeBase64Field(request.body.mac, 'body/mac'),
          macLength: request.body.macLength,
        })
      },
    }),
  ]
}
