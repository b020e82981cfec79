import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { type DataRoute, dataRoute } from '../http/data-route.ts'
import { errorResponses, nameSchema, Uuid } from '../http/http-schemas.ts'
import { decodeBase64Field } from '../platform/base64.ts'
import { invalidField } from '../platform/errors.ts'
import { Base64, Base64Output, KeyIdParams, KeyVersion } from './crypto-schemas.ts'
import type { SignatureOptions } from './signing.ts'
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

const Message = Base64('The message (or its digest), Base64', MAX_MESSAGE_BASE64)

const SignBody = Type.Object(
  {
    keyId: Type.Optional(Uuid('Signing key (default: the tenant default Signing key)')),
    message: Message,
    ...SchemeOptions,
  },
  { $id: 'SignRequest', additionalProperties: false, examples: [{ message: 'SGVsbG8sIHdvcmxkIQ==' }] },
)

const SignResponse = Type.Object({
  signature: Base64Output('Base64'),
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
    keyId: Type.Optional(Uuid('Signing key (default: the tenant default Signing key)')),
    keyVersion: Type.Optional(KeyVersion('The version that signed (default: the current version)')),
    message: Message,
    signature: Base64('The signature, Base64', 65_536),
    ...SchemeOptions,
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
        keyVersion: 1,
        message: 'SGVsbG8sIHdvcmxkIQ==',
        signature: 'yk/ZjmEuzq5u4SEMlzriVPsJAPK+la7mhyPabJcdfuZPoGRqb1JHpV7XUy4XEqChoh+Rhzyt2Tz+dM8MVqLTIg==',
      },
    ],
  },
)

const VerifyResponse = Type.Object({
  valid: Type.Boolean(),
  keyId: Uuid('The key used'),
  keyVersion: Type.Integer({ description: 'The version used' }),
})
nameSchema(VerifyResponse, 'VerifyResponse')

const MacBody = Type.Object(
  { data: Message },
  { $id: 'MacRequest', additionalProperties: false, examples: [{ data: 'SGVsbG8sIHdvcmxkIQ==' }] },
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
    keyVersion: Type.Optional(KeyVersion('The version that computed the MAC (default: the current version)')),
    keyId: Type.Optional(Uuid('From the mac answer: must be the key of the path')),
    algorithm: AnsweredAlgorithm,
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
}): SignatureOptions {
  return {
    messageType: body.messageType ?? 'RAW',
    rsaPadding: body.rsaPadding ?? 'PSS',
    signatureFormat: body.signatureFormat ?? 'DER',
    saltLength: body.saltLength,
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
        return { ...result, signature: result.signature.toString('base64') }
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
      handler: async (request) =>
        signing.verify(actorOf(request), {
          keyId: request.body.keyId,
          keyVersion: request.body.keyVersion,
          message: decodeBase64Field(request.body.message, 'body/message'),
          signature: decodeBase64Field(request.body.signature, 'body/signature'),
          options: optionsOf(withScheme(request.body)),
        }),
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
        const keyId = request.params.keyId
        if (request.body.keyId !== undefined && request.body.keyId !== keyId) {
          throw invalidField('body/keyId', `names key ${request.body.keyId}, but the path names key ${keyId}`)
        }
        return signing.verifyMac(actorOf(request), {
          keyId,
          keyVersion: request.body.keyVersion,
          data: decodeBase64Field(request.body.data, 'body/data'),
          mac: decodeBase64Field(request.body.mac, 'body/mac'),
        })
      },
    }),
  ]
}
