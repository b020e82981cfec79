import { type components, dataOf } from '@kms/sdk'
import {
  type CommandContext,
  type CommandNode,
  integerFlag,
  parseCommandArgs,
  usageError,
} from '../command.ts'
import { printAnswer } from '../output.ts'
import { dateFlag, printList, str, strings } from './shared.ts'

/** `kms keys …`: the key lifecycle of /api/v1/keys (create, rotate, revoke, schedule deletion, …). */

type KeyView = components['schemas']['KeyView']
type KeyType = KeyView['keyType']
type Algorithm = KeyView['algorithm']
type KeyState = KeyView['state']

const KEY_TYPES: readonly KeyType[] = ['Encryption', 'Signing', 'HMAC']
const ALGORITHMS: readonly Algorithm[] = [
  'ML-KEM-512',
  'ML-KEM-768',
  'ML-KEM-1024',
  'X-Wing',
  'RSA-2048',
  'RSA-3072',
  'RSA-4096',
  'AES-128-GCM',
  'AES-192-GCM',
  'AES-256-GCM',
  'ML-DSA-44',
  'ML-DSA-65',
  'ML-DSA-87',
  'SLH-DSA-128s',
  'EC-P256',
  'EC-P384',
  'EC-P521',
  'Ed25519',
  'HMAC-SHA256',
  'HMAC-SHA384',
  'HMAC-SHA512',
]
const STATES: readonly KeyState[] = ['Active', 'Expired', 'Revoked', 'Pending Deletion', 'Destroyed']
const SORTS = ['name', 'algorithm', 'purpose', 'version', 'status', 'createdAt'] as const
const PUBLIC_FORMATS = ['PEM', 'DER', 'RAW', 'JWK'] as const

const KEY_COLUMNS = ['id', 'name', 'keyType', 'algorithm', 'state', 'version', 'aliases', 'createdAt']
const KEY_ARG = { min: 1, max: 1, names: '<key> (a key id or alias/<name>)' }

function printKey(ctx: CommandContext, key: KeyView): number {
  printAnswer({ value: key }, ctx)
  return 0
}

const list: CommandNode = {
  name: 'list',
  summary: 'List keys (favourites first, newest first)',
  help: `Usage: kms keys list [--state S]... [--type T]... [--algorithm A]... [--label L]... [--search TEXT]
                     [--sort COLUMN] [--order asc|desc] [--limit N] [--cursor C] [--all]

  --state      ${STATES.join(', ')} (repeat for several)
  --type       ${KEY_TYPES.join(', ')}
  --algorithm  e.g. ML-KEM-768, Ed25519 (repeat for several)
  --label      keys carrying any of these labels
  --sort       ${SORTS.join(', ')} (default createdAt)
  --limit      1 to 100 per page (default 50); --cursor continues after a page; --all fetches every page

Examples:
  kms keys list --type Signing --state Active
  kms keys list --all --output json --field data.0.id`,
  async run(args, ctx) {
    const { values } = parseCommandArgs(
      args,
      {
        state: { type: 'string', multiple: true, choices: STATES },
        type: { type: 'string', multiple: true, choices: KEY_TYPES },
        algorithm: { type: 'string', multiple: true, choices: ALGORITHMS },
        label: { type: 'string', multiple: true },
        search: { type: 'string' },
        sort: { type: 'string', choices: SORTS },
        order: { type: 'string', choices: ['asc', 'desc'] },
        limit: { type: 'string' },
        cursor: { type: 'string' },
        all: { type: 'boolean' },
      },
      { min: 0, max: 0, names: 'no arguments' },
    )
    const query = {
      status: strings(values['state']) as KeyState[] | undefined,
      keyType: strings(values['type']) as KeyType[] | undefined,
      algorithm: strings(values['algorithm']) as Algorithm[] | undefined,
      label: strings(values['label']),
      search: str(values['search']),
      sort: (str(values['sort']) ?? 'createdAt') as (typeof SORTS)[number],
      order: (str(values['order']) ?? 'desc') as 'asc' | 'desc',
      limit: integerFlag(values['limit'], 'limit', 1, 100) ?? 50,
    }
    const client = await ctx.client()
    let cursor = str(values['cursor'])
    let page = await dataOf(client.api.GET('/api/v1/keys', { params: { query: { ...query, cursor } } }))
    const items = [...page.data]
    while (values['all'] && page.nextCursor) {
      cursor = page.nextCursor
      page = await dataOf(client.api.GET('/api/v1/keys', { params: { query: { ...query, cursor } } }))
      items.push(...page.data)
    }
    const value = { ...page, data: items }
    return printList(
      ctx,
      value,
      items,
      KEY_COLUMNS,
      page.nextCursor ? `--cursor ${page.nextCursor}` : undefined,
    )
  },
}

const create: CommandNode = {
  name: 'create',
  summary: 'Generate a key (active at once)',
  help: `Usage: kms keys create --name NAME --type ${KEY_TYPES.join('|')} [--algorithm A] [--description TEXT]
                       [--label L]... [--expires-at ISO] [--default] [--exportable]

  --algorithm    ${ALGORITHMS.join(', ')}
                 (default: the type's default, e.g. ML-KEM-768 for Encryption)
  --default      make it the tenant's default key of its type
  --exportable   allow exporting its private key later (POST /keys/{id}/export-private); fixed at creation

Examples:
  kms keys create --name payments --type Encryption
  kms keys create --name releases --type Signing --algorithm Ed25519 --label team:build --field id`,
  async run(args, ctx) {
    const { values } = parseCommandArgs(
      args,
      {
        name: { type: 'string' },
        type: { type: 'string', choices: KEY_TYPES },
        algorithm: { type: 'string', choices: ALGORITHMS },
        description: { type: 'string' },
        label: { type: 'string', multiple: true },
        'expires-at': { type: 'string' },
        default: { type: 'boolean' },
        exportable: { type: 'boolean' },
      },
      { min: 0, max: 0, names: 'no arguments (the name is --name)' },
    )
    const name = str(values['name'])
    const keyType = str(values['type']) as KeyType | undefined
    if (name === undefined) throw usageError('--name is required')
    if (keyType === undefined) throw usageError(`--type is required: ${KEY_TYPES.join(', ')}`)
    const body = {
      name,
      keyType,
      algorithm: str(values['algorithm']) as Algorithm | undefined,
      description: str(values['description']),
      labels: strings(values['label']),
      expiresAt: dateFlag(values['expires-at'], 'expires-at'),
      isDefault: values['default'] === true ? true : undefined,
      exportable: values['exportable'] === true ? true : undefined,
    }
    const client = await ctx.client()
    const key = await dataOf(client.api.POST('/api/v1/keys', { body }))
    return printKey(ctx, key)
  },
}

/** A command that takes one key and POSTs or GETs one path of it, answering the key. */
function keyAction(
  name: string,
  summary: string,
  help: string,
  call: (ctx: CommandContext, keyId: string) => Promise<KeyView>,
): CommandNode {
  return {
    name,
    summary,
    help,
    async run(args, ctx) {
      const { positionals } = parseCommandArgs(args, {}, KEY_ARG)
      return printKey(ctx, await call(ctx, positionals[0]!))
    },
  }
}

const get = keyAction(
  'get',
  'Show a key',
  `Usage: kms keys get <key>

<key> is a key id or an alias (alias/<name>).

Examples:
  kms keys get 0b6f…
  kms keys get alias/payments --field state`,
  async (ctx, keyId) =>
    dataOf((await ctx.client()).api.GET('/api/v1/keys/{keyId}', { params: { path: { keyId } } })),
)

const rotate = keyAction(
  'rotate',
  'Add a new version (new material, same key id)',
  `Usage: kms keys rotate <key>

New operations use the new version; data encrypted or signed by older versions still decrypts and verifies.

Example:
  kms keys rotate alias/payments --field version`,
  async (ctx, keyId) =>
    dataOf((await ctx.client()).api.POST('/api/v1/keys/{keyId}/rotate', { params: { path: { keyId } } })),
)

const revoke = keyAction(
  'revoke',
  'Revoke a key (irreversible; decrypt and verify still work)',
  `Usage: kms keys revoke <key>

A revoked key no longer encrypts, signs or computes MACs; what it protected can still be decrypted and verified.

Example:
  kms keys revoke 0b6f…`,
  async (ctx, keyId) =>
    dataOf((await ctx.client()).api.POST('/api/v1/keys/{keyId}/revoke', { params: { path: { keyId } } })),
)

const cancelDeletion = keyAction(
  'cancel-deletion',
  'Cancel a scheduled deletion before its date',
  `Usage: kms keys cancel-deletion <key>

Example:
  kms keys cancel-deletion 0b6f…`,
  async (ctx, keyId) =>
    dataOf(
      (await ctx.client()).api.POST('/api/v1/keys/{keyId}/cancel-deletion', { params: { path: { keyId } } }),
    ),
)

const scheduleDeletion: CommandNode = {
  name: 'delete',
  summary: 'Schedule deletion (Pending Deletion; destroyed after the window)',
  help: `Usage: kms keys delete <key> [--days N]

  --days   days before the material is destroyed (default 30); kms keys cancel-deletion works until then

Example:
  kms keys delete 0b6f… --days 7`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(args, { days: { type: 'string' } }, KEY_ARG)
    const pendingWindowDays = integerFlag(values['days'], 'days', 1, 3650) ?? 30
    const client = await ctx.client()
    const key = await dataOf(
      client.api.DELETE('/api/v1/keys/{keyId}', {
        params: { path: { keyId: positionals[0]! }, query: { pendingWindowDays } },
      }),
    )
    return printKey(ctx, key)
  },
}

const update: CommandNode = {
  name: 'update',
  summary: 'Change name, description, labels, expiration, default or favourite status',
  help: `Usage: kms keys update <key> [--name NAME] [--description TEXT] [--label L]... [--no-labels]
                             [--expires-at ISO | --no-expiry] [--default] [--favorite true|false]

  --label       replaces the labels with these (repeat for several); --no-labels removes them all
  --no-expiry   the key never expires

Example:
  kms keys update alias/payments --description "card data" --label pci --label team:payments`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      {
        name: { type: 'string' },
        description: { type: 'string' },
        label: { type: 'string', multiple: true },
        'no-labels': { type: 'boolean' },
        'expires-at': { type: 'string' },
        'no-expiry': { type: 'boolean' },
        default: { type: 'boolean' },
        favorite: { type: 'string', choices: ['true', 'false'] },
      },
      KEY_ARG,
    )
    if (values['expires-at'] !== undefined && values['no-expiry'])
      throw usageError('give --expires-at or --no-expiry, not both')
    if (values['label'] !== undefined && values['no-labels'])
      throw usageError('give --label or --no-labels, not both')
    const body = {
      name: str(values['name']),
      description: str(values['description']),
      labels: values['no-labels'] ? [] : strings(values['label']),
      expiresAt: values['no-expiry'] ? null : dateFlag(values['expires-at'], 'expires-at'),
      isDefault: values['default'] === true ? true : undefined,
      isFavorite: values['favorite'] === undefined ? undefined : values['favorite'] === 'true',
    }
    if (Object.values(body).every((v) => v === undefined))
      throw usageError(
        'nothing to change: give --name, --description, --label, --no-labels, --expires-at, --no-expiry, --default or --favorite',
      )
    const client = await ctx.client()
    const key = await dataOf(
      client.api.PATCH('/api/v1/keys/{keyId}', { params: { path: { keyId: positionals[0]! } }, body }),
    )
    return printKey(ctx, key)
  },
}

const versions: CommandNode = {
  name: 'versions',
  summary: 'List the versions of a key',
  help: `Usage: kms keys versions <key>

Example:
  kms keys versions alias/payments`,
  async run(args, ctx) {
    const { positionals } = parseCommandArgs(args, {}, KEY_ARG)
    const client = await ctx.client()
    const answer = await dataOf(
      client.api.GET('/api/v1/keys/{keyId}/versions', { params: { path: { keyId: positionals[0]! } } }),
    )
    return printList(ctx, answer, answer.data, ['version', 'state', 'isCurrent', 'createdAt'])
  },
}

const publicKey: CommandNode = {
  name: 'public-key',
  summary: 'Export the public key (PEM, DER, RAW or JWK)',
  help: `Usage: kms keys public-key <key> [--format ${PUBLIC_FORMATS.join('|')}] [--key-version N]

--output raw writes the key itself: PEM text, DER or RAW bytes, or the JWK's JSON.

Examples:
  kms keys public-key alias/releases --output raw > releases.pem
  kms keys public-key alias/releases --format DER --output raw > releases.der`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      { format: { type: 'string', choices: PUBLIC_FORMATS }, 'key-version': { type: 'string' } },
      KEY_ARG,
    )
    const format = (str(values['format']) ?? 'PEM') as (typeof PUBLIC_FORMATS)[number]
    const version = integerFlag(values['key-version'], 'key-version')
    const client = await ctx.client()
    const answer = await dataOf(
      client.api.GET('/api/v1/keys/{keyId}/public', {
        params: {
          path: { keyId: positionals[0]! },
          query: { format, version },
        },
      }),
    )
    let raw: Uint8Array | string
    if ('publicKey' in answer && typeof answer.publicKey === 'string')
      raw = format === 'PEM' ? answer.publicKey : new Uint8Array(Buffer.from(answer.publicKey, 'base64'))
    else raw = `${JSON.stringify(answer)}\n`
    printAnswer({ value: answer, raw, whole: true, ...(typeof raw === 'string' ? { text: raw } : {}) }, ctx)
    return 0
  },
}

export const keysCommand: CommandNode = {
  name: 'keys',
  summary: 'Create, list and manage keys (rotate, revoke, delete, …)',
  help: `Usage: kms keys <command> [flags]

A key is named by its id or an alias (alias/<name>) wherever <key> appears. The API has no
enable/disable: a key is Active until it expires, is revoked, or is scheduled for deletion.`,
  children: [
    list,
    create,
    get,
    update,
    rotate,
    revoke,
    scheduleDeletion,
    cancelDeletion,
    versions,
    publicKey,
  ],
}
