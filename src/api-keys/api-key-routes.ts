import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { AuditLog } from '../audit/audit-log.ts'
import { access } from '../auth/access.ts'
import { authorizationRequestOf, recordDenied } from '../auth/auth-hook.ts'
import { KEY_ENTRY_PATTERN, KEY_OPERATIONS, MAX_RESTRICTED_KEYS } from '../auth/key-restriction.ts'
import { actorOf, principalOf } from '../auth/request-context.ts'
import { ScopeSchema } from '../auth/scopes.ts'
import { errorResponses, IdParams, PageQuery, Text, Timestamp, toDate, Uuid } from '../http/http-schemas.ts'
import { PATTERN_MESSAGE } from '../http/validation.ts'
import { AppError } from '../platform/errors.ts'
import type { ApiKeyService } from './api-key-service.ts'

const KeyOperationSchema = Type.Enum(KEY_OPERATIONS, {
  description: 'A cryptographic operation (the audit action without `crypto.`)',
})

const RestrictedKeys = Type.Array(
  Type.String({
    pattern: KEY_ENTRY_PATTERN,
    maxLength: 256,
    [PATTERN_MESSAGE]: 'must be a key id (UUID) or an alias: alias/ and 1 to 250 of A-Z a-z 0-9 / _ -',
    description: 'A key id, or an alias `alias/<name>` (the key the alias names when the key is used)',
  }),
  {
    minItems: 1,
    maxItems: MAX_RESTRICTED_KEYS,
    description:
      'The keys the API key may use, by id or alias; key ids must be keys of the tenant, aliases need not exist yet',
  },
)

const RestrictedOperations = Type.Array(KeyOperationSchema, {
  minItems: 1,
  maxItems: 64,
  description: 'The cryptographic operations the API key may perform, within its scopes',
})

const ApiKeySchema = Type.Object(
  {
    id: Uuid('API key id'),
    name: Type.String(),
    scopes: Type.Array(Type.String()),
    prefix: Type.String({ description: 'First characters of the key, to recognise it' }),
    createdAt: Timestamp('Creation time'),
    createdBy: Type.String({ description: 'Actor that created the key' }),
    parentId: Type.Union(
      [Uuid('The API key that created this one; revoking it revokes this one'), Type.Null()],
      {
        description: 'null for keys made by the CLI or at tenant creation',
      },
    ),
    expiresAt: Type.Union([Timestamp('Expiry'), Type.Null()]),
    revokedAt: Type.Union([Timestamp('Revocation time'), Type.Null()]),
    keys: Type.Union([Type.Array(Type.String()), Type.Null()], {
      description: 'Key ids and aliases the key may use, fixed at creation; null: every key of the tenant',
    }),
    operations: Type.Union([Type.Array(KeyOperationSchema), Type.Null()], {
      description:
        'Cryptographic operations the key may perform, fixed at creation; null: all its scopes allow',
    }),
    lastUsedAt: Type.Union([Timestamp('The latest audited request made with the key'), Type.Null()], {
      description:
        'When the key last made a request the audit log records (every cryptographic operation and change, and refusals; not reads); null: never',
    }),
  },
  { $id: 'ApiKeyView', title: 'ApiKey' },
)

const CreateApiKeyBody = Type.Object(
  {
    name: Text(200, 'A label for the key', 1),
    scopes: Type.Array(ScopeSchema, {
      minItems: 1,
      maxItems: 64,
      description: 'Scopes granted; a key can only grant scopes it holds itself',
    }),
    expiresAt: Type.Optional(
      Timestamp(
        "When the key stops working; required, and no later than the creating key's expiry, when the creating key expires",
      ),
    ),
    keys: Type.Optional(RestrictedKeys),
    operations: Type.Optional(RestrictedOperations),
  },
  {
    $id: 'CreateApiKeyRequest',
    additionalProperties: false,
    description:
      'A key created by a restricted API key must name `keys` and `operations` within its own (403 `restriction_escalation`)',
    examples: [
      {
        name: 'ci-payments',
        scopes: ['keys:read', 'encryption:write'],
        keys: ['alias/payments-prod'],
        operations: ['encrypt', 'generate_data_key'],
        expiresAt: '2030-06-30T00:00:00Z',
      },
    ],
  },
)

export function apiKeyRoutes(service: ApiKeyService, audit: AuditLog): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/api-keys',
      {
        config: { access: access.scope('apikeys:write') },
        schema: {
          tags: ['API keys'],
          summary: 'Create an API key (the key is returned once, only here)',
          operationId: 'createApiKey',
          body: CreateApiKeyBody,
          response: {
            201: Type.Object({ ...ApiKeySchema.properties, key: Type.String({ description: 'Shown once' }) }),
            ...errorResponses(403),
          },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request)
        const missing = request.body.scopes.filter((s) => !principal.scopes.has(s))
        if (missing.length > 0) {
          await recordDenied(audit, authorizationRequestOf(request), missing.join(' '))
          throw new AppError(403, 'scope_escalation', 'A caller cannot grant scopes it does not hold', {
            missingScopes: missing,
          })
        }
        const { view, key } = await service.create(actorOf(request), {
          name: request.body.name,
          scopes: request.body.scopes,
          expiresAt: request.body.expiresAt ? toDate(request.body.expiresAt, 'body/expiresAt') : null,
          keys: request.body.keys ?? null,
          operations: request.body.operations ?? null,
          ...(principal.kind === 'apiKey' ? { parent: principal } : {}),
        })
        return reply.code(201).send({ ...view, key })
      },
    )

    app.get(
      '/api-keys',
      {
        config: { access: access.scope('apikeys:read') },
        schema: {
          tags: ['API keys'],
          summary: "List the tenant's API keys",
          operationId: 'listApiKeys',
          querystring: Type.Object(
            {
              ...PageQuery,
              includeRevoked: Type.Boolean({ default: false, description: 'Also list revoked keys' }),
            },
            { additionalProperties: false },
          ),
          response: {
            200: Type.Object({ data: Type.Array(ApiKeySchema), total: Type.Integer() }),
            ...errorResponses(403),
          },
        },
      },
      async (request) => service.list(principalOf(request).tenantId, request.query),
    )

    app.get(
      '/api-keys/:id',
      {
        config: { access: access.scope('apikeys:read') },
        schema: {
          tags: ['API keys'],
          summary: 'Get one API key',
          operationId: 'getApiKey',
          params: IdParams,
          response: { 200: ApiKeySchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => service.get(principalOf(request).tenantId, request.params.id),
    )

    app.post(
      '/api-keys/:id/revoke',
      {
        config: { access: access.scope('apikeys:write') },
        schema: {
          tags: ['API keys'],
          summary:
            'Revoke an API key and every key it created, transitively (irreversible; effective on every process within a second). The caller must hold every scope of the key.',
          operationId: 'revokeApiKey',
          params: IdParams,
          response: {
            200: Type.Object({
              ...ApiKeySchema.properties,
              revokedDescendants: Type.Array(Uuid('A key revoked with this one'), {
                description: 'Keys this key created, directly or through others, revoked with it',
              }),
            }),
            ...errorResponses(403, 404),
          },
        },
      },
      async (request) => service.revoke(actorOf(request), request.params.id, principalOf(request)),
    )
  }
}
