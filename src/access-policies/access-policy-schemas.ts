import { Type } from 'typebox'
import { nameSchema, PageQuery, Printable, Text, Timestamp, Uuid } from '../http/http-schemas.ts'
import { POLICY_ACTIONS, POLICY_LIMITS } from './access-policy-service.ts'

const ACTIONS = POLICY_ACTIONS.join(', ')

const IdList = (description: string) =>
  Type.Array(Uuid(description), {
    maxItems: POLICY_LIMITS.conditionItems,
    description: `${description}s; empty or absent: any`,
  })

const Priority = (absent: string) =>
  Type.Integer({
    minimum: 0,
    maximum: POLICY_LIMITS.maxPriority,
    description: `Evaluation order, lowest first; unique within the tenant (409 priority_taken). Absent: ${absent}`,
  })

const fields = {
  name: Printable(POLICY_LIMITS.nameChars, 'What the policy is for'),
  description: Type.Optional(Text(POLICY_LIMITS.descriptionChars, 'Notes (absent: empty)')),
  // A string rather than an enum: RequireMfa answers its own error (action_not_supported).
  action: Type.String({
    minLength: 1,
    maxLength: 64,
    description: `One of ${ACTIONS}. RequireMfa is not released: 400 action_not_supported`,
    examples: ['Deny'],
  }),
  priority: Type.Optional(
    Priority(
      `after every other policy of the tenant (their highest priority + ${POLICY_LIMITS.defaultPriorityStep}; ${POLICY_LIMITS.defaultPriorityStep} for the first)`,
    ),
  ),
  applicationIds: Type.Optional(IdList('An application the policy applies to')),
  endUserIds: Type.Optional(IdList('An end-user the policy applies to')),
  roleIds: Type.Optional(IdList('A role whose holders the policy applies to')),
  ipRanges: Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: 64, description: 'CIDR, IPv4 or IPv6' }), {
      maxItems: POLICY_LIMITS.conditionItems,
      description: 'Source address ranges (CIDR, IPv4 or IPv6); empty or absent: any address',
    }),
  ),
}

export const AccessPolicySchema = Type.Object(
  {
    id: Uuid('The policy'),
    name: Type.String(),
    description: Type.String(),
    action: Type.String({
      description: `${ACTIONS} (a row written before this release may read RequireMfa)`,
    }),
    priority: Type.Integer(),
    applicationIds: Type.Array(Type.String()),
    endUserIds: Type.Array(Type.String()),
    roleIds: Type.Array(Type.String()),
    ipRanges: Type.Array(Type.String()),
    createdAt: Timestamp('Created'),
    updatedAt: Timestamp('Last changed'),
  },
  { additionalProperties: false },
)
nameSchema(AccessPolicySchema, 'AccessPolicy')

export const AccessPolicyListSchema = Type.Object(
  { data: Type.Array(AccessPolicySchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(AccessPolicyListSchema, 'AccessPolicyList')

const EXAMPLE = {
  name: 'Outside the office needs approval',
  action: 'AllowWithApproval',
  priority: 10,
  ipRanges: ['0.0.0.0/0', '::/0'],
}

export const AccessPolicyBody = Type.Object(fields, { additionalProperties: false, examples: [EXAMPLE] })
nameSchema(AccessPolicyBody, 'AccessPolicyInput')

export const AccessPolicyPatchBody = Type.Object(
  {
    ...fields,
    name: Type.Optional(fields.name),
    action: Type.Optional(fields.action),
    // The default is a create's and a PUT's: a PATCH without a priority keeps the stored one.
    priority: Type.Optional(Priority('kept')),
  },
  { additionalProperties: false, minProperties: 1, examples: [{ action: 'Deny' }] },
)
nameSchema(AccessPolicyPatchBody, 'AccessPolicyPatch')

export const AccessPolicyListQuery = Type.Object({ ...PageQuery }, { additionalProperties: false })

const REQUEST_STATUSES = ['pending', 'approved', 'rejected', 'expired'] as const

export const AccessRequestSchema = Type.Object(
  {
    id: Uuid('The request'),
    applicationId: Uuid('The application the end-user is signing in to'),
    endUserId: Uuid('The end-user'),
    policyId: Type.Union([Type.String(), Type.Null()], { description: 'The policy that asked for approval' }),
    status: Type.Enum(REQUEST_STATUSES),
    sourceIp: Type.Union([Type.String(), Type.Null()]),
    requestedAt: Timestamp('Asked'),
    expiresAt: Timestamp('A pending request lapses then'),
    decidedAt: Type.Union([Timestamp('Decided'), Type.Null()]),
    decidedBy: Type.Union([Type.String(), Type.Null()], { description: 'member:<id>' }),
    reason: Type.Union([Type.String(), Type.Null()]),
    accessExpiresAt: Type.Union([Timestamp('An approval lets the end-user in until then'), Type.Null()]),
    emailDispatchStatus: Type.Union([Type.Enum(['queued', 'sent', 'failed']), Type.Null()], {
      description: 'The e-mail telling the end-user of the decision',
    }),
  },
  { additionalProperties: false },
)
nameSchema(AccessRequestSchema, 'AccessRequest')

export const AccessRequestListSchema = Type.Object(
  { data: Type.Array(AccessRequestSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(AccessRequestListSchema, 'AccessRequestList')

export const AccessRequestListQuery = Type.Object(
  {
    ...PageQuery,
    status: Type.Optional(Type.Enum(REQUEST_STATUSES, { description: 'Only requests in this state' })),
  },
  { additionalProperties: false },
)

export const AccessDecisionBody = Type.Object(
  { reason: Type.Optional(Text(POLICY_LIMITS.reasonChars, 'Why; told to the end-user')) },
  { additionalProperties: false, examples: [{ reason: 'Contract confirmed' }] },
)
nameSchema(AccessDecisionBody, 'AccessDecision')
