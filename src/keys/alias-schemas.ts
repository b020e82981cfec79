import { Type } from 'typebox'
import { Timestamp, Uuid } from '../http/http-schemas.ts'
import { PATTERN_MESSAGE } from '../http/validation.ts'
import { ALIAS_PATTERN, KEY_REF_PATTERN, MAX_ALIAS_CHARS, MAX_ALIAS_NAME_CHARS } from './alias-name.ts'

const ALIAS_RULE = `alias/ then 1 to ${MAX_ALIAS_NAME_CHARS} of A-Z a-z 0-9 / _ -`

/**
 * A key reference, wherever the API takes a key id (path, body `keyId`, `X-Key-Id`): the key's
 * id (a UUID) or one of its aliases (docs/keys.md "Key aliases"). Answers always carry the id.
 * Not lower-cased by validation as ids alone are: aliases are case-sensitive; the key resolver
 * reads an id in either case.
 */
export const KeyRef = (description: string) =>
  Type.String({
    maxLength: MAX_ALIAS_CHARS,
    pattern: KEY_REF_PATTERN,
    [PATTERN_MESSAGE]: `must be a key id (UUID) or an alias (${ALIAS_RULE})`,
    description: `${description}: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>)`,
  })

const AliasName = (description: string) =>
  Type.String({
    minLength: 7,
    maxLength: MAX_ALIAS_CHARS,
    pattern: ALIAS_PATTERN,
    [PATTERN_MESSAGE]: `must be an alias: ${ALIAS_RULE}`,
    description: `${description}. Case-sensitive, unique in the tenant; alias/kms/ is reserved`,
  })

/** `/aliases/{alias}`: the whole alias, URL-encoded (`alias%2Fpayments-prod`). */
export const AliasParams = Type.Object(
  { alias: AliasName('The alias, URL-encoded: alias%2F<name>') },
  { additionalProperties: false },
)

export const AliasSchema = Type.Object(
  {
    alias: Type.String({ description: 'alias/<name>' }),
    keyId: Uuid('The key the alias names'),
    createdAt: Timestamp('When the alias was created'),
    updatedAt: Timestamp('When the alias was last moved (createdAt until then)'),
  },
  { $id: 'KeyAlias', title: 'KeyAlias' },
)

export const CreateAliasBody = Type.Object(
  {
    alias: AliasName('The new alias'),
    keyId: KeyRef('The key it names'),
  },
  {
    $id: 'CreateKeyAliasRequest',
    additionalProperties: false,
    examples: [{ alias: 'alias/payments-prod', keyId: '3f0c9a8e-5b1d-4c2a-9e7f-1a2b3c4d5e6f' }],
  },
)

export const MoveAliasBody = Type.Object(
  { keyId: KeyRef('The key the alias names from now on: of the same key type as the current one') },
  {
    $id: 'MoveKeyAliasRequest',
    additionalProperties: false,
    examples: [{ keyId: '7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6' }],
  },
)

export const ListAliasesQuery = Type.Object(
  {
    keyId: Type.Optional(KeyRef('Only the aliases of this key')),
    limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'Aliases per page' }),
    cursor: Type.Optional(
      Type.String({
        maxLength: 512,
        pattern: '^[A-Za-z0-9_-]+$',
        description: 'nextCursor of the previous page',
      }),
    ),
  },
  { additionalProperties: false },
)

export const AliasListSchema = Type.Object(
  {
    data: Type.Array(AliasSchema, { description: 'In alias order (byte order)' }),
    nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as cursor for the next page' }),
  },
  { $id: 'KeyAliasList' },
)
