import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, IdParams } from '../http/http-schemas.ts'
import {
  ConnectionListSchema,
  ConnectionSchema,
  ConnectionTestSchema,
  CreateConnectionBody,
  CreateExportBody,
  ExportListSchema,
  ExportSchema,
  KeyExportParams,
  KeyParams,
  RotateCredentialsBody,
} from './cloud-export-schemas.ts'
import type { CloudExportService } from './cloud-export-service.ts'

const CONNECTIONS = ['Cloud connections']
const EXPORTS = ['Cloud exports']
const NEEDS_EXPORT =
  'Needs keys:write and keys:export: a cloud connection or export sends private keys out of the service.'
/** What sends private keys out of the service (NEEDS_EXPORT): a 403 names the first scope missing. */
const SENDS_KEYS_OUT = access.allScopes('keys:write', 'keys:export')

/**
 * Cloud KMS export (docs/cloud-export.md): a tenant's connections to clouds, and its keys'
 * exports to them. Pushes happen in the job process; these routes record what is wanted.
 */
export function cloudExportRoutes(exports: CloudExportService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/cloud-connections',
      {
        config: { access: SENDS_KEYS_OUT },
        schema: {
          tags: CONNECTIONS,
          summary: 'Store credentials for a cloud KMS (sealed by the tenant KEK, never returned)',
          description: `${NEEDS_EXPORT} An endpoint field other than the provider's own hosts is 400 unless the operator allowed its origin (KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS).`,
          operationId: 'createCloudConnection',
          body: CreateConnectionBody,
          response: { 201: ConnectionSchema, ...errorResponses(403, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return exports.createConnection(actorOf(request), request.body)
      },
    )
    app.get(
      '/cloud-connections',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: CONNECTIONS,
          summary: 'The tenant’s cloud connections (without credentials)',
          operationId: 'listCloudConnections',
          response: { 200: ConnectionListSchema, ...errorResponses(403) },
        },
      },
      async (request) => exports.listConnections(actorOf(request)),
    )
    app.get(
      '/cloud-connections/:id',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: CONNECTIONS,
          summary: 'A cloud connection (without credentials)',
          operationId: 'getCloudConnection',
          params: IdParams,
          response: { 200: ConnectionSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => exports.getConnection(actorOf(request), request.params.id),
    )
    app.put(
      '/cloud-connections/:id/credentials',
      {
        config: { access: SENDS_KEYS_OUT },
        schema: {
          tags: CONNECTIONS,
          summary: 'Replace a connection’s credentials (rotation); the next push uses them',
          description: NEEDS_EXPORT,
          operationId: 'rotateCloudCredentials',
          params: IdParams,
          body: RotateCredentialsBody,
          response: { 200: ConnectionSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) =>
        exports.rotateCredentials(actorOf(request), request.params.id, request.body.credentials),
    )
    app.post(
      '/cloud-connections/:id/test',
      {
        config: { access: SENDS_KEYS_OUT },
        schema: {
          tags: CONNECTIONS,
          summary: 'One authenticated call to the cloud: do the credentials work?',
          description: `${NEEDS_EXPORT} A failure is the answer (status failed with the cloud’s reason), not an HTTP error.`,
          operationId: 'testCloudConnection',
          params: IdParams,
          response: { 200: ConnectionTestSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => exports.testConnection(actorOf(request), request.params.id),
    )
    app.delete(
      '/cloud-connections/:id',
      {
        config: { access: SENDS_KEYS_OUT },
        schema: {
          tags: CONNECTIONS,
          summary: 'Delete a connection no export uses (409 connection_in_use otherwise)',
          description: NEEDS_EXPORT,
          operationId: 'deleteCloudConnection',
          params: IdParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        await exports.deleteConnection(actorOf(request), request.params.id)
        return reply.code(204).send(null)
      },
    )

    app.post(
      '/keys/:keyId/cloud-exports',
      {
        config: { access: SENDS_KEYS_OUT },
        schema: {
          tags: EXPORTS,
          summary: 'Export a key to a cloud KMS; the first push is due at once',
          description: `${NEEDS_EXPORT} A key not created or imported with exportable: true is 409 key_not_exportable (as for export-private). Spec 2.2 decides what each provider takes: a post-quantum or HMAC key, or an algorithm the provider lacks, is 400 algorithm_not_supported naming the provider's algorithms. A vault URL other than the provider's own hosts is 400 unless the operator allowed its origin (KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS).`,
          operationId: 'createCloudExport',
          params: KeyParams,
          body: CreateExportBody,
          response: { 201: ExportSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return exports.createExport(actorOf(request), request.params.keyId, request.body)
      },
    )
    app.get(
      '/keys/:keyId/cloud-exports',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: EXPORTS,
          summary: 'The key’s cloud exports with their sync state',
          operationId: 'listCloudExports',
          params: KeyParams,
          response: { 200: ExportListSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => exports.listExports(actorOf(request), request.params.keyId),
    )
    app.get(
      '/keys/:keyId/cloud-exports/:exportId',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: EXPORTS,
          summary: 'A cloud export with its sync state (lastSyncAt, lastSyncVersion, lastSyncError)',
          operationId: 'getCloudExport',
          params: KeyExportParams,
          response: { 200: ExportSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => exports.getExport(actorOf(request), request.params.keyId, request.params.exportId),
    )
    app.delete(
      '/keys/:keyId/cloud-exports/:exportId',
      {
        config: { access: access.scope('keys:write') },
        schema: {
          tags: EXPORTS,
          summary: 'Stop exporting the key there (what the cloud holds stays: delete it there)',
          operationId: 'deleteCloudExport',
          params: KeyExportParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(403, 404) },
        },
      },
      async (request, reply) => {
        await exports.deleteExport(actorOf(request), request.params.keyId, request.params.exportId)
        return reply.code(204).send(null)
      },
    )
    app.post(
      '/keys/:keyId/cloud-exports/:exportId/sync',
      {
        config: { access: access.scope('keys:write') },
        schema: {
          tags: EXPORTS,
          summary: 'Push the key’s current version now (202: the job process pushes it)',
          description:
            'Answers 202 with the export pending; the job process pushes within one sweep (KMS_JOB_SWEEP_MS) and records lastSyncAt/lastSyncVersion or lastSyncError. Poll GET to follow it. A key not created exportable is 409 key_not_exportable, and the export is left failed with that error.',
          operationId: 'syncCloudExport',
          params: KeyExportParams,
          response: { 202: ExportSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.code(202)
        return exports.requestSync(actorOf(request), request.params.keyId, request.params.exportId)
      },
    )
  }
}
