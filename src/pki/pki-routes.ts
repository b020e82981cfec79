import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf, missingScopesFor } from '../auth/request-context.ts'
import { errorResponses, IdParams, Uuid } from '../http/http-schemas.ts'
import type { CaService } from './ca-service.ts'
import type { CertificateService } from './certificate-service.ts'
import type { OcspResponder } from './ocsp-responder.ts'
import {
  CaListSchema,
  CaSchema,
  CertificateListSchema,
  CertificateSchema,
  CreateCaBody,
  CreateRoleBody,
  FormatQuery,
  ImportCaCertificateBody,
  IssueCertificateBody,
  IssuedCertificateSchema,
  ListCasQuery,
  ListCertificatesQuery,
  RevocationSchema,
  RevokeBody,
  RoleListSchema,
  RoleParams,
  RoleSchema,
  SerialParams,
  UpdateCaBody,
  UpdateRoleBody,
} from './pki-schemas.ts'
import type { RoleService } from './role-service.ts'
import { toPem } from './x509.ts'

const TAGS = ['Certificates']
const READ = access.scope('certificates:read')
const WRITE = access.scope('certificates:write')
/** A CA on an existing key reserves the key for good: a change of its lifecycle (keys:write). */
const EXISTING_KEY = 'existingKey'
const CREATE_CA = access.withConditions(WRITE, { [EXISTING_KEY]: ['keys:write'] })

/** The media types RFC 5280 §4.2.1.13 / RFC 2585 name for a DER CRL and certificate. */
const DER_TYPES = { crl: 'application/pkix-crl', certificate: 'application/pkix-cert' } as const
const PEM_LABELS = { crl: 'X509 CRL', certificate: 'CERTIFICATE' } as const

/** RFC 6960 Appendix A: the media types of OCSP over HTTP. */
const OCSP_REQUEST = 'application/ocsp-request'
const OCSP_RESPONSE = 'application/ocsp-response'
/**
 * Past this Fastify answers 413; below it an over-large request (over 8 KiB, OCSP_LIMITS) is the
 * responder's malformedRequest, a 200 as RFC 6960 asks.
 */
const OCSP_BODY_LIMIT = 64 * 1024
const OcspGetParams = Type.Object(
  {
    id: Uuid('The CA id'),
    request: Type.String({
      maxLength: 16_384,
      description: 'The DER OCSPRequest in Base64 (or Base64url), URL-encoded (RFC 6960 Appendix A.1)',
    }),
  },
  { additionalProperties: false },
)

/** X.509 certificate authorities, their roles, the certificates they issue, and their CRLs. */
export function pkiRoutes(deps: {
  cas: CaService
  roles: RoleService
  certificates: CertificateService
  ocsp: OcspResponder
}): FastifyPluginAsyncTypebox {
  const { cas, roles, certificates, ocsp } = deps
  return async (app) => {
    app.post(
      '/cas',
      {
        config: { access: CREATE_CA },
        schema: {
          tags: TAGS,
          summary:
            'Create a root or intermediate CA on a key the service holds (never exported); keyId also needs keys:write',
          operationId: 'createCa',
          body: CreateCaBody,
          response: { 201: CaSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return cas.create(actorOf(request), request.body, {
          missingForExistingKey: missingScopesFor(request, EXISTING_KEY),
        })
      },
    )

    app.get(
      '/cas',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'List the tenant’s CAs',
          operationId: 'listCas',
          querystring: ListCasQuery,
          response: { 200: CaListSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        const { limit, offset } = request.query
        return { ...(await cas.list(actorOf(request), { limit, offset })), limit, offset }
      },
    )

    app.get(
      '/cas/:id',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'One CA, with its certificate and chain (or its CSR while pending)',
          operationId: 'getCa',
          params: IdParams,
          response: { 200: CaSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => cas.get(actorOf(request), request.params.id),
    )

    app.patch(
      '/cas/:id',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Change the CRL and issuing-certificate URLs (before the first issuance)',
          operationId: 'updateCa',
          params: IdParams,
          body: UpdateCaBody,
          response: { 200: CaSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => cas.update(actorOf(request), request.params.id, request.body),
    )

    app.post(
      '/cas/:id/certificate',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Import the certificate an outside parent issued for a pending intermediate',
          operationId: 'importCaCertificate',
          params: IdParams,
          body: ImportCaCertificateBody,
          response: { 200: CaSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => cas.importCertificate(actorOf(request), request.params.id, request.body),
    )

    for (const what of ['certificate', 'crl'] as const) {
      app.get(
        `/cas/:id/${what}`,
        {
          config: { access: access.public() },
          schema: {
            tags: TAGS,
            summary:
              what === 'crl'
                ? 'The CA’s current CRL (public, like the web’s): DER, or PEM with format=pem'
                : 'The CA’s certificate (public: the AIA caIssuers URL): DER, or PEM with format=pem',
            operationId: what === 'crl' ? 'getCaCrl' : 'getCaCertificate',
            security: [],
            params: IdParams,
            querystring: FormatQuery,
            response: {
              200: Type.String({ description: `${DER_TYPES[what]}, or PEM` }),
              ...errorResponses(404),
            },
          },
        },
        async (request, reply) => {
          const der = await cas.published(request.params.id, what)
          const pem = request.query.format === 'pem'
          return reply
            .header('content-type', pem ? 'application/x-pem-file' : DER_TYPES[what])
            .header('cache-control', 'public, max-age=300')
            .send((pem ? toPem(der, PEM_LABELS[what]) : der) as unknown as string)
        },
      )
    }

    // OCSP (RFC 6960), public like the CRL: every answer is a 200 OCSPResponse, its status saying
    // what went wrong (docs/pki.md, "OCSP"). Its own plugin: the body parser is for these routes.
    await app.register(async (scope) => {
      const ocspApp = scope.withTypeProvider<TypeBoxTypeProvider>()
      ocspApp.addContentTypeParser(
        OCSP_REQUEST,
        { parseAs: 'buffer', bodyLimit: OCSP_BODY_LIMIT },
        (_request, body, done) => done(null, body),
      )
      const answer = { 200: Type.String({ description: `${OCSP_RESPONSE}: a DER OCSPResponse` }) }
      ocspApp.post(
        '/cas/:id/ocsp',
        {
          config: { access: access.public() },
          bodyLimit: OCSP_BODY_LIMIT,
          schema: {
            tags: TAGS,
            summary: `The CA’s OCSP responder (RFC 6960, public): a DER OCSPRequest as ${OCSP_REQUEST}`,
            operationId: 'postCaOcsp',
            security: [],
            params: IdParams,
            response: { ...answer, ...errorResponses(413, 415) },
          },
        },
        async (request, reply) => {
          const der = await ocsp.respond(request.params.id, request.body as Buffer)
          return reply
            .header('content-type', OCSP_RESPONSE)
            .header('cache-control', 'no-store')
            .send(der as unknown as string)
        },
      )
      ocspApp.get(
        // Non-empty: `/ocsp/` is no request, and no public route either.
        '/cas/:id/ocsp/:request(.+)',
        {
          config: { access: access.public() },
          schema: {
            tags: TAGS,
            summary: 'The CA’s OCSP responder (RFC 6960 Appendix A.1, public): the request in the path',
            operationId: 'getCaOcsp',
            security: [],
            params: OcspGetParams,
            response: { ...answer, ...errorResponses() },
          },
        },
        async (request, reply) => {
          const der = await ocsp.respondToGet(request.params.id, request.params.request)
          return reply
            .header('content-type', OCSP_RESPONSE)
            .header('cache-control', 'no-store')
            .send(der as unknown as string)
        },
      )
    })

    app.post(
      '/cas/:id/roles',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Create a role: what the CA certifies when asked through it',
          operationId: 'createCaRole',
          params: IdParams,
          body: CreateRoleBody,
          response: { 201: RoleSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return roles.create(actorOf(request), request.params.id, request.body)
      },
    )

    app.get(
      '/cas/:id/roles',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'The CA’s roles',
          operationId: 'listCaRoles',
          params: IdParams,
          response: { 200: RoleListSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => roles.list(actorOf(request), request.params.id),
    )

    app.get(
      '/cas/:id/roles/:name',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'One role',
          operationId: 'getCaRole',
          params: RoleParams,
          response: { 200: RoleSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => roles.get(actorOf(request), request.params.id, request.params.name),
    )

    app.patch(
      '/cas/:id/roles/:name',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Change a role (certificates already issued keep what they say)',
          operationId: 'updateCaRole',
          params: RoleParams,
          body: UpdateRoleBody,
          response: { 200: RoleSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => roles.update(actorOf(request), request.params.id, request.params.name, request.body),
    )

    app.delete(
      '/cas/:id/roles/:name',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Delete a role',
          operationId: 'deleteCaRole',
          params: RoleParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(403, 404) },
        },
      },
      async (request, reply) => {
        await roles.remove(actorOf(request), request.params.id, request.params.name)
        return reply.code(204).send(null)
      },
    )

    app.post(
      '/certificates',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Issue a certificate through a role: from a CSR, or with a key pair generated for it',
          operationId: 'issueCertificate',
          body: IssueCertificateBody,
          response: { 201: IssuedCertificateSchema, ...errorResponses(403, 404, 409, 429, 503) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return certificates.issue(actorOf(request), request.body)
      },
    )

    app.get(
      '/certificates',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'List stored certificates (by CA, status, or ending soon)',
          operationId: 'listCertificates',
          querystring: ListCertificatesQuery,
          response: { 200: CertificateListSchema, ...errorResponses(403) },
        },
      },
      async (request) => certificates.list(actorOf(request), request.query),
    )

    app.get(
      '/certificates/:serial',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'One stored certificate by serial (hex)',
          operationId: 'getCertificate',
          params: SerialParams,
          response: { 200: CertificateSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => certificates.get(actorOf(request), request.params.serial),
    )

    app.post(
      '/certificates/:serial/revoke',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Revoke a certificate (the CA’s CRL is rebuilt before the answer)',
          operationId: 'revokeCertificate',
          params: SerialParams,
          body: RevokeBody,
          response: { 200: RevocationSchema, ...errorResponses(403, 404, 409, 429, 503) },
        },
      },
      async (request) => certificates.revoke(actorOf(request), request.params.serial, request.body),
    )
  }
}
