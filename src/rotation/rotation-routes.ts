import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, nameSchema, Timestamp } from '../http/http-schemas.ts'
import { KeyIdParams } from '../keys/key-schemas.ts'
import { FREQUENCIES } from './rotation-schedule.ts'
import type { RotationService } from './rotation-service.ts'

const TAGS = ['Rotation policies']

const RotationPolicyBody = Type.Object(
  {
    frequency: Type.Enum(FREQUENCIES, {
      description: 'Daily 24 h, Weekly 7 d, Monthly 30 d, Quarterly 90 d, Yearly 365 d (spec 2.3)',
    }),
    webhookUrl: Type.Optional(
      Type.Union([
        Type.String({
          minLength: 1,
          maxLength: 2048,
          description:
            'http(s) URL notified with a signed key.rotated event at each rotation (X-Service-Signature)',
        }),
        Type.Null(),
      ]),
    ),
  },
  { $id: 'RotationPolicyRequest', additionalProperties: false, examples: [{ frequency: 'Quarterly' }] },
)

const RotationPolicySchema = Type.Object({
  keyId: Type.String({ format: 'uuid' }),
  frequency: Type.Enum(FREQUENCIES),
  intervalSeconds: Type.Integer({ description: 'The interval the frequency stands for' }),
  webhookUrl: Type.Union([Type.String(), Type.Null()]),
  paused: Type.Boolean(),
  pausedAt: Type.Union([Timestamp('When the policy was paused (kept while paused)'), Type.Null()]),
  nextRotationAt: Type.Union([
    Timestamp('When the next version is created (null while paused)'),
    Type.Null(),
  ]),
  lastRotatedAt: Type.Union([Timestamp('The last rotation, by the policy or by hand'), Type.Null()]),
  createdAt: Timestamp('When the policy was created'),
  updatedAt: Timestamp('When the policy last changed'),
})
nameSchema(RotationPolicySchema, 'RotationPolicyView')

export function rotationRoutes(rotation: RotationService): FastifyPluginAsyncTypebox {
  return async (app) => {
    const path = '/keys/:keyId/rotation-policy'
    const common = { tags: TAGS, params: KeyIdParams }

    app.post(
      path,
      {
        config: { access: access.scope('keys:write') },
        schema: {
          ...common,
          summary: 'Create or replace the key rotation policy (a new frequency restarts the schedule)',
          operationId: 'setRotationPolicy',
          body: RotationPolicyBody,
          response: { 200: RotationPolicySchema, ...errorResponses(403, 404, 409) },
        },
      },
      async (request) => rotation.set(actorOf(request), request.params.keyId, request.body),
    )

    app.get(
      path,
      {
        config: { access: access.scope('keys:read') },
        schema: {
          ...common,
          summary: 'The key rotation policy',
          operationId: 'getRotationPolicy',
          response: { 200: RotationPolicySchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => rotation.get(actorOf(request), request.params.keyId),
    )

    app.delete(
      path,
      {
        config: { access: access.scope('keys:write') },
        schema: {
          ...common,
          summary: 'Remove the key rotation policy',
          operationId: 'deleteRotationPolicy',
          response: { 204: Type.Null({ description: 'Removed' }), ...errorResponses(403, 404) },
        },
      },
      async (request, reply) => {
        await rotation.remove(actorOf(request), request.params.keyId)
        return reply.code(204).send(null)
      },
    )

    for (const action of ['pause', 'resume'] as const) {
      app.post(
        `${path}/${action}`,
        {
          config: { access: access.scope('keys:write') },
          schema: {
            ...common,
            summary:
              action === 'pause'
                ? 'Pause the policy: no rotations until resumed; the pause time is kept'
                : 'Resume the policy: a rotation that fell due meanwhile happens at once',
            operationId: `${action}RotationPolicy`,
            response: { 200: RotationPolicySchema, ...errorResponses(403, 404) },
          },
        },
        async (request) => rotation[action](actorOf(request), request.params.keyId),
      )
    }
  }
}
