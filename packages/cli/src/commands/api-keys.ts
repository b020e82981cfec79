import { type components, dataOf } from '@kms/sdk'
import { type CommandNode, EXIT, integerFlag, parseCommandArgs, usageError } from '../command.ts'
import { printAnswer } from '../output.ts'
import { dateFlag, printList, str, strings } from './shared.ts'

/** `kms api-keys …`: the tenant's API keys (/api/v1/api-keys). A new key's secret is shown once. */

type CreateApiKey = components['schemas']['CreateApiKeyRequest']
type Scope = CreateApiKey['scopes'][number]
type Operation = NonNullable<CreateApiKey['operations']>[number]

/** Every scope the API knows: a record over the generated type, so a scope added to the API fails the build until it is here. */
const SCOPES = Object.keys({
  'keys:read': true,
  'keys:write': true,
  'keys:export': true,
  'encryption:write': true,
  'encrypt:invoke': true,
  'secrets:read': true,
  'secrets:write': true,
  'audit:read': true,
  'apikeys:read': true,
  'apikeys:write': true,
  'ssh:read': true,
  'ssh:write': true,
  'certificates:read': true,
  'certificates:write': true,
  'applications:read': true,
  'applications:write': true,
  'endusers:read': true,
  'endusers:write': true,
  'roles:read': true,
  'roles:write': true,
  'policies:read': true,
  'policies:write': true,
  'billing:read': true,
} satisfies Record<Scope, true>) as Scope[]
/** Every operation an API key can be limited to (exhaustive over the API's type, as SCOPES). */
const OPERATIONS = Object.keys({
  encrypt: true,
  decrypt: true,
  re_encrypt: true,
  generate_data_key: true,
  wrap: true,
  unwrap: true,
  sign: true,
  verify: true,
  mac: true,
  mac_verify: true,
} satisfies Record<Operation, true>) as Operation[]
const COLUMNS = ['id', 'name', 'prefix', 'scopes', 'expiresAt', 'revokedAt', 'lastUsedAt']
const ID_ARG = { min: 1, max: 1, names: '<id> (an API key id)' }

const list: CommandNode = {
  name: 'list',
  summary: "List the tenant's API keys (never their secrets)",
  help: `Usage: kms api-keys list [--include-revoked] [--limit N] [--offset N]

Example:
  kms api-keys list --include-revoked`,
  async run(args, ctx) {
    const { values } = parseCommandArgs(
      args,
      { 'include-revoked': { type: 'boolean' }, limit: { type: 'string' }, offset: { type: 'string' } },
      { min: 0, max: 0, names: 'no arguments' },
    )
    const limit = integerFlag(values['limit'], 'limit', 1, 1000) ?? 100
    const offset = integerFlag(values['offset'], 'offset', 0, 1_000_000) ?? 0
    const client = await ctx.client()
    const page = await dataOf(
      client.api.GET('/api/v1/api-keys', {
        params: { query: { limit, offset, includeRevoked: values['include-revoked'] === true } },
      }),
    )
    const more = offset + page.data.length < page.total ? `--offset ${offset + page.data.length}` : undefined
    return printList(ctx, page, page.data, COLUMNS, more)
  },
}

const create: CommandNode = {
  name: 'create',
  summary: 'Create an API key (its secret is printed once)',
  help: `Usage: kms api-keys create --name NAME --scope S... [--expires-at ISO] [--key KEY]... [--operation OP]...

  --scope S       repeat for several: ${SCOPES.join(', ')}
  --key KEY       limit the crypto operations to these keys (ids or aliases; repeat)
  --operation OP  limit them to these operations: ${OPERATIONS.join(', ')}

The answer's "key" is the secret: it is shown here only. --output raw (or --field key) prints it alone.

Example:
  kms api-keys create --name ci --scope encrypt:invoke --key alias/payments --operation encrypt --output raw`,
  async run(args, ctx) {
    const { values } = parseCommandArgs(
      args,
      {
        name: { type: 'string' },
        scope: { type: 'string', multiple: true, choices: SCOPES },
        'expires-at': { type: 'string' },
        key: { type: 'string', multiple: true },
        operation: { type: 'string', multiple: true, choices: OPERATIONS },
      },
      { min: 0, max: 0, names: 'no arguments (the name is --name)' },
    )
    const name = str(values['name'])
    const scopes = strings(values['scope']) as Scope[] | undefined
    if (name === undefined) throw usageError('--name is required')
    if (scopes === undefined)
      throw usageError(`--scope is required (repeat for several): ${SCOPES.join(', ')}`)
    const body = {
      name,
      scopes,
      expiresAt: dateFlag(values['expires-at'], 'expires-at'),
      keys: strings(values['key']),
      operations: strings(values['operation']) as Operation[] | undefined,
    }
    const client = await ctx.client()
    const created = await dataOf(client.api.POST('/api/v1/api-keys', { body }))
    printAnswer({ value: created, raw: created.key }, ctx)
    if (ctx.settings.output === 'table' && ctx.settings.field === undefined)
      ctx.io.stderr.write('The key is shown only now: store it (e.g. in KMS_API_KEY) before you go on.\n')
    return EXIT.ok
  },
}

const get: CommandNode = {
  name: 'get',
  summary: 'Show an API key (without its secret)',
  help: `Usage: kms api-keys get <id>

Example:
  kms api-keys get 7c1e…`,
  async run(args, ctx) {
    const { positionals } = parseCommandArgs(args, {}, ID_ARG)
    const client = await ctx.client()
    const apiKey = await dataOf(
      client.api.GET('/api/v1/api-keys/{id}', { params: { path: { id: positionals[0]! } } }),
    )
    printAnswer({ value: apiKey }, ctx)
    return EXIT.ok
  },
}

const revoke: CommandNode = {
  name: 'revoke',
  summary: 'Revoke an API key and every key it created (irreversible)',
  help: `Usage: kms api-keys revoke <id>

Example:
  kms api-keys revoke 7c1e…`,
  async run(args, ctx) {
    const { positionals } = parseCommandArgs(args, {}, ID_ARG)
    const client = await ctx.client()
    const revoked = await dataOf(
      client.api.POST('/api/v1/api-keys/{id}/revoke', { params: { path: { id: positionals[0]! } } }),
    )
    printAnswer({ value: revoked }, ctx)
    return EXIT.ok
  },
}

export const apiKeysCommand: CommandNode = {
  name: 'api-keys',
  summary: "Create, list and revoke the tenant's API keys",
  help: 'Usage: kms api-keys <command> [flags]',
  children: [list, create, get, revoke],
}
