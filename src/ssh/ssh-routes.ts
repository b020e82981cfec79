import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf, missingScopesFor } from '../auth/request-context.ts'
import { errorResponses, IdParams } from '../http/http-schemas.ts'
import type { SshCaService } from './ssh-ca-service.ts'
import type { SshCertificateService } from './ssh-certificate-service.ts'
import {
  CreateSshCaBody,
  ListSshCertificatesQuery,
  RevokeSshCertificateBody,
  SignSshCertificateBody,
  SshCaListSchema,
  SshCaSchema,
  SshCertificateListSchema,
  SshCertificateSchema,
  UpdateSshCaBody,
} from './ssh-schemas.ts'

const TAGS = ['SSH']
const READ = access.scope('ssh:read')
const WRITE = access.scope('ssh:write')
/** A CA on an existing key reserves the key for good: a change of its lifecycle (keys:write). */
const EXISTING_KEY = 'existingKey'
const CREATE_CA = access.withConditions(WRITE, { [EXISTING_KEY]: ['keys:write'] })

/** The SSH CAs (/ssh/ca) and their certificates (/ssh/certificates): docs/ssh.md. */
export function sshRoutes(deps: {
  cas: SshCaService
  certificates: SshCertificateService
}): FastifyPluginAsyncTypebox {
  const { cas, certificates } = deps
  return async (app) => {
    app.post(
      '/ssh/ca',
      {
        config: { access: CREATE_CA },
        schema: {
          tags: TAGS,
          summary:
            'Create the tenant’s user or host CA, on a new key or an existing non-exportable Signing key (keyId: also keys:write)',
          operationId: 'createSshCa',
          body: CreateSshCaBody,
          response: { 201: SshCaSchema, ...errorResponses(403, 404, 409) },
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
      '/ssh/ca',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'The tenant’s SSH CAs (a user CA and a host CA at most)',
          operationId: 'listSshCas',
          response: { 200: SshCaListSchema, ...errorResponses(403) },
        },
      },
      async (request) => ({ data: await cas.list(actorOf(request)) }),
    )

    app.get(
      '/ssh/ca/:id',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'One SSH CA, with its public key as authorized_keys and known_hosts lines',
          operationId: 'getSshCa',
          params: IdParams,
          response: { 200: SshCaSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => cas.get(actorOf(request), request.params.id),
    )

    app.patch(
      '/ssh/ca/:id',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Change a CA’s default and maximum certificate validity',
          operationId: 'updateSshCa',
          params: IdParams,
          body: UpdateSshCaBody,
          response: { 200: SshCaSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => cas.update(actorOf(request), request.params.id, request.body),
    )

    app.get(
      '/ssh/ca/:id/public-key',
      {
        config: { access: access.public() },
        schema: {
          tags: TAGS,
          summary: 'The CA’s public key as one OpenSSH line, text/plain (public: no credential)',
          operationId: 'getSshCaPublicKey',
          security: [],
          params: IdParams,
          response: {
            200: Type.String({ description: 'text/plain: `<type> <base64> <comment>` and a newline' }),
            ...errorResponses(404),
          },
        },
      },
      async (request, reply) => {
        const line = await cas.publicKey(request.params.id)
        return reply
          .header('content-type', 'text/plain; charset=utf-8')
          .header('cache-control', 'public, max-age=300')
          .send(line)
      },
    )

    app.get(
      '/ssh/ca/:id/krl',
      {
        config: { access: access.public() },
        schema: {
          tags: TAGS,
          summary: 'The CA’s key revocation list for sshd’s RevokedKeys, application/octet-stream (public)',
          operationId: 'getSshCaKrl',
          security: [],
          params: IdParams,
          response: {
            200: Type.String({ description: 'application/octet-stream: an OpenSSH KRL (PROTOCOL.krl)' }),
            ...errorResponses(404),
          },
        },
      },
      async (request, reply) => {
        const krl = await cas.krl(request.params.id)
        return (
          reply
            .header('content-type', 'application/octet-stream')
            // Built on request: a revocation shows in the next fetch.
            .header('cache-control', 'no-store')
            // A Buffer is sent as is; the string schema above only documents the file.
            .send(krl as unknown as string)
        )
      },
    )

    app.post(
      '/ssh/certificates',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Sign a public key: an OpenSSH user or host certificate from the named CA',
          operationId: 'signSshCertificate',
          body: SignSshCertificateBody,
          response: { 201: SshCertificateSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return certificates.issue(actorOf(request), request.body)
      },
    )

    app.get(
      '/ssh/certificates',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary:
            'The certificates the tenant’s CAs issued, newest first; filters: caType, revoked, expiring',
          operationId: 'listSshCertificates',
          querystring: ListSshCertificatesQuery,
          response: { 200: SshCertificateListSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        const { data, total } = await certificates.list(actorOf(request), request.query)
        return { data, total, limit: request.query.limit, offset: request.query.offset }
      },
    )

    app.get(
      '/ssh/certificates/:id',
      {
        config: { access: READ },
        schema: {
          tags: TAGS,
          summary: 'One certificate, with its -cert.pub line',
          operationId: 'getSshCertificate',
          params: IdParams,
          response: { 200: SshCertificateSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => certificates.get(actorOf(request), request.params.id),
    )

    app.post(
      '/ssh/certificates/:id/revoke',
      {
        config: { access: WRITE },
        schema: {
          tags: TAGS,
          summary: 'Revoke a certificate: the CA’s KRL lists its serial until it expires',
          operationId: 'revokeSshCertificate',
          params: IdParams,
          body: RevokeSshCertificateBody,
          response: { 200: SshCertificateSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => certificates.revoke(actorOf(request), request.params.id, request.body),
    )
  }
}
