import { Type } from 'typebox'
import { nameSchema, PageQuery, Timestamp, Uuid } from '../http/http-schemas.ts'
import { KeyRef as KeyReference } from '../keys/alias-schemas.ts'

const KeyRef = Type.Object({ id: Type.String(), name: Type.String() }, { additionalProperties: false })

const PurposeGroupSchema = Type.Object(
  {
    keyType: Type.String(),
    algorithm: Type.String(),
    shared: Type.Object(
      {
        kind: Type.Enum(['label', 'word']),
        value: Type.String({ description: 'The label, or the significant word (lower-case)' }),
      },
      { additionalProperties: false },
    ),
    count: Type.Integer({ description: 'Active keys of this type and algorithm that share it' }),
    examples: Type.Array(KeyRef, { description: 'The group’s first and last key by name' }),
  },
  { additionalProperties: false },
)
nameSchema(PurposeGroupSchema, 'InsightPurposeGroup')

const FindingSchema = Type.Object(
  {
    code: Type.Enum(
      [
        'expired_key_in_use',
        'weak_algorithm',
        'no_rotation_policy',
        'expiring_soon',
        'rotation_paused_too_long',
        'unused_key',
        'post_quantum_candidate',
        'untagged_key',
        'duplicate_purpose',
      ],
      { description: 'docs/insights.md describes each finding and its thresholds' },
    ),
    severity: Type.Enum(['critical', 'warning', 'info']),
    title: Type.String(),
    count: Type.Integer({ description: 'How many keys the finding holds for' }),
    keys: Type.Array(KeyRef, {
      description: 'The affected keys, by name: at most 100, the first by name (count is the total)',
    }),
    recommendation: Type.String(),
    reference: Type.Union([
      Type.String({ description: 'The standard or rule behind the finding' }),
      Type.Null(),
    ]),
    groups: Type.Optional(
      Type.Array(PurposeGroupSchema, {
        description:
          'duplicate_purpose in the tenant’s report: the largest groups (at most 20) of keys sharing a label or a word',
      }),
    ),
  },
  { additionalProperties: false },
)
nameSchema(FindingSchema, 'InsightFinding')

export const InsightsSchema = Type.Object(
  {
    generatedAt: Timestamp('When the report was made'),
    summary: Type.Object(
      { critical: Type.Integer(), warning: Type.Integer(), info: Type.Integer() },
      {
        additionalProperties: false,
        description: 'Affected keys per severity (a key counts once per finding)',
      },
    ),
    findings: Type.Array(FindingSchema),
  },
  { additionalProperties: false },
)
nameSchema(InsightsSchema, 'Insights')

const SuggestionStatus = Type.Enum(['pending', 'accepted', 'rejected'])

export const SuggestionSchema = Type.Object(
  {
    id: Type.String(),
    keyId: Type.String(),
    label: Type.String(),
    reason: Type.String({ description: 'Why the engine suggests it' }),
    engine: Type.Enum(['builtin', 'model']),
    status: SuggestionStatus,
    jobId: Type.Union([Type.String(), Type.Null()]),
    createdAt: Timestamp('Suggested'),
    decidedAt: Type.Union([Timestamp('Accepted or rejected'), Type.Null()]),
    decidedBy: Type.Union([Type.String(), Type.Null()]),
  },
  { additionalProperties: false },
)
nameSchema(SuggestionSchema, 'TagSuggestion')

export const SuggestionListSchema = Type.Object(
  { data: Type.Array(SuggestionSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(SuggestionListSchema, 'TagSuggestionList')

export const CreatedSuggestionsSchema = Type.Object(
  { data: Type.Array(SuggestionSchema) },
  { additionalProperties: false },
)
nameSchema(CreatedSuggestionsSchema, 'CreatedTagSuggestions')

export const DecidedSchema = Type.Object(
  { decided: Type.Integer(), data: Type.Array(SuggestionSchema) },
  { additionalProperties: false },
)
nameSchema(DecidedSchema, 'DecidedTagSuggestions')

export const DecideAllBody = Type.Object(
  { keyId: Type.Optional(Uuid('Only this key’s pending suggestions')) },
  { additionalProperties: false, examples: [{}] },
)
nameSchema(DecideAllBody, 'DecideAllTagSuggestions')

export const SuggestionQuery = Type.Object(
  { status: Type.Optional(SuggestionStatus), keyId: Type.Optional(Uuid('Only this key')), ...PageQuery },
  { additionalProperties: false },
)

export const JobSchema = Type.Object(
  {
    id: Type.String(),
    status: Type.Enum(['running', 'completed', 'failed'], {
      description:
        'failed: a batch failed 3 times (error says why); the keys before it keep their suggestions',
    }),
    totalKeys: Type.Integer(),
    processedKeys: Type.Integer(),
    batchSize: Type.Integer(),
    batchesTotal: Type.Integer(),
    batchesDone: Type.Integer(),
    suggestionsCreated: Type.Integer(),
    engine: Type.Union([Type.String(), Type.Null()]),
    createdAt: Timestamp('Asked for'),
    finishedAt: Type.Union([Timestamp('Completed or failed'), Type.Null()]),
    error: Type.Union([
      Type.String({ description: 'Why the job failed (while it is retried: the last attempt’s error)' }),
      Type.Null(),
    ]),
  },
  { additionalProperties: false },
)
nameSchema(JobSchema, 'TagSuggestionJob')

export const KeyIdParams = Type.Object({ keyId: KeyReference('The key') }, { additionalProperties: false })
