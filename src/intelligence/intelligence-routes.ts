import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { access } from '../auth/access.ts'
import { actorOf } from '../auth/request-context.ts'
import { errorResponses, IdParams } from '../http/http-schemas.ts'
import {
  CreatedSuggestionsSchema,
  DecideAllBody,
  DecidedSchema,
  InsightsSchema,
  JobSchema,
  KeyIdParams,
  SuggestionListSchema,
  SuggestionQuery,
  SuggestionSchema,
} from './intelligence-schemas.ts'
import type { IntelligenceService } from './intelligence-service.ts'

const INSIGHTS = ['Insights']
const TAGS = ['Tag suggestions']

/** Insights and tag suggestions (docs/insights.md). */
export function intelligenceRoutes(intelligence: IntelligenceService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/insights',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: INSIGHTS,
          summary: 'Findings about the tenant’s keys: critical, warnings, information',
          operationId: 'getInsights',
          response: { 200: InsightsSchema, ...errorResponses(403) },
        },
      },
      async (request) => intelligence.insights(actorOf(request)),
    )
    app.get(
      '/keys/:keyId/insights',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: INSIGHTS,
          summary: 'The findings that name one key',
          operationId: 'getKeyInsights',
          params: KeyIdParams,
          response: { 200: InsightsSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => intelligence.keyInsights(actorOf(request), request.params.keyId),
    )
    app.post(
      '/keys/:keyId/tag-suggestions',
      {
        config: { access: access.scope('keys:write') },
        schema: {
          tags: TAGS,
          summary: 'Suggest labels for one key now (stored as pending)',
          operationId: 'suggestKeyTags',
          params: KeyIdParams,
          response: { 201: CreatedSuggestionsSchema, ...errorResponses(403, 404) },
        },
      },
      async (request, reply) => {
        reply.code(201)
        return intelligence.suggestForKey(actorOf(request), request.params.keyId)
      },
    )
    app.get(
      '/tag-suggestions',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: 'The tenant’s tag suggestions, newest first (filter by status or key)',
          operationId: 'listTagSuggestions',
          querystring: SuggestionQuery,
          response: { 200: SuggestionListSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => {
        const { status, keyId, limit, offset } = request.query
        return intelligence.list(
          actorOf(request),
          { ...(status ? { status } : {}), ...(keyId ? { keyId } : {}) },
          { limit, offset },
        )
      },
    )
    for (const decision of ['accept', 'reject'] as const) {
      app.post(
        `/tag-suggestions/:id/${decision}`,
        {
          config: { access: access.scope('keys:write') },
          schema: {
            tags: TAGS,
            summary:
              decision === 'accept'
                ? 'Accept a pending suggestion: its label is added to the key'
                : 'Reject a pending suggestion (the label is not suggested again)',
            operationId: `${decision}TagSuggestion`,
            params: IdParams,
            response: { 200: SuggestionSchema, ...errorResponses(403, 404, 409) },
          },
        },
        async (request) => intelligence.decide(actorOf(request), request.params.id, decision),
      )
      app.post(
        `/tag-suggestions/${decision}-all`,
        {
          config: { access: access.scope('keys:write') },
          schema: {
            tags: TAGS,
            summary: `${decision === 'accept' ? 'Accept' : 'Reject'} every pending suggestion of the tenant (or of one key)`,
            operationId: `${decision}AllTagSuggestions`,
            body: DecideAllBody,
            response: { 200: DecidedSchema, ...errorResponses(403, 404) },
          },
        },
        async (request) => intelligence.decideAll(actorOf(request), decision, request.body.keyId),
      )
    }
    app.post(
      '/tag-suggestion-jobs',
      {
        config: { access: access.scope('keys:write') },
        schema: {
          tags: TAGS,
          summary: 'Suggest labels for every active key in the background (batches of 10)',
          description: 'Answers 202 with the job; poll GET /tag-suggestion-jobs/{id} for its progress.',
          operationId: 'startTagSuggestionJob',
          response: { 202: JobSchema, ...errorResponses(403) },
        },
      },
      async (request, reply) => {
        reply.code(202)
        return intelligence.startJob(actorOf(request))
      },
    )
    app.get(
      '/tag-suggestion-jobs/:id',
      {
        config: { access: access.scope('keys:read') },
        schema: {
          tags: TAGS,
          summary: 'A suggestion job’s progress',
          operationId: 'getTagSuggestionJob',
          params: IdParams,
          response: { 200: JobSchema, ...errorResponses(403, 404) },
        },
      },
      async (request) => intelligence.getJob(actorOf(request), request.params.id),
    )
  }
}
