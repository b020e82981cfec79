import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, IdParams } from '../http/http-schemas.ts'
import type { FolderService } from './folder-service.ts'
import {
  CreateFolderBody,
  FolderListSchema,
  FolderSchema,
  ListFoldersQuery,
  UpdateFolderBody,
} from './secret-schemas.ts'

const TAGS = ['Secrets']

/** Folders organise secrets; they take the secrets scopes. */
export function folderRoutes(folders: FolderService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/folders',
      {
        config: { access: access.scope('secrets:write') },
        schema: {
          tags: TAGS,
          summary: 'Create a folder, at the top level or inside another',
          operationId: 'createFolder',
          body: CreateFolderBody,
          response: { 201: FolderSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return folders.create(actorOf(request), request.body)
      },
    )

    app.get(
      '/folders',
      {
        config: { access: access.scope('secrets:read') },
        schema: {
          tags: TAGS,
          summary: 'List folders by path; parentId=<id> or root lists one level',
          operationId: 'listFolders',
          querystring: ListFoldersQuery,
          response: { 200: FolderListSchema, ...errorResponses(403) },
        },
      },
      async (request) => {
        const { parentId, limit, offset } = request.query
        const parent = parentId === 'root' ? null : parentId
        const { data, total } = await folders.list(actorOf(request), parent, { limit, offset })
        return { data, total, limit, offset }
      },
    )

    app.get(
      '/folders/:id',
      {
        config: { access: access.scope('secrets:read') },
        schema: {
          tags: TAGS,
          summary: 'One folder with its path',
          operationId: 'getFolder',
          params: IdParams,
          response: { 200: FolderSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => folders.get(actorOf(request), request.params.id),
    )

    app.patch(
      '/folders/:id',
      {
        config: { access: access.scope('secrets:write') },
        schema: {
          tags: TAGS,
          summary: 'Rename a folder or move it under another (its secrets and subfolders move with it)',
          operationId: 'updateFolder',
          params: IdParams,
          body: UpdateFolderBody,
          response: { 200: FolderSchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => folders.update(actorOf(request), request.params.id, request.body),
    )

    app.delete(
      '/folders/:id',
      {
        config: { access: access.scope('secrets:write') },
        schema: {
          tags: TAGS,
          summary: 'Delete an empty folder',
          operationId: 'deleteFolder',
          params: IdParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        await folders.remove(actorOf(request), request.params.id)
        return reply.code(204).send(null)
      },
    )
  }
}
