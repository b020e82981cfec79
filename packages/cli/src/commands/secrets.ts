import { dataOf, type KmsClient } from '@kms/sdk'
import {
  CliError,
  type CommandContext,
  type CommandNode,
  EXIT,
  integerFlag,
  parseCommandArgs,
  usageError,
} from '../command.ts'
import { readSecretInput, utf8Text } from '../input.ts'
import { printAnswer } from '../output.ts'
import { printList, str, strings } from './shared.ts'

/**
 * `kms secrets …`: named values of /api/v1/secrets. A secret is named by its id or its name;
 * a value is read from @file or stdin, never from the command line (where `ps` shows it).
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const SECRET_ARG = { min: 1, max: 1, names: '<secret> (its name or id)' }
const FOLDER_HELP = `  --folder ID   the folder the name is looked up in (an id, or root for the top level)`

interface Found {
  id: string
  name: string
}

/** The id of a secret named by id or by name; a name in several folders needs --folder. */
async function findSecret(
  ctx: CommandContext,
  client: KmsClient,
  ref: string,
  folder: string | undefined,
): Promise<Found | undefined> {
  if (UUID.test(ref)) return { id: ref.toLowerCase(), name: ref }
  // The curl command would be the name's lookup, not the command's own request.
  if (ctx.settings.curl)
    throw usageError(
      `with --output-curl-string, name the secret by its id (kms secrets list shows it), not "${ref}"`,
    )
  const page = await dataOf(
    client.api.GET('/api/v1/secrets', {
      params: {
        query: { search: ref, include: 'folderId', folderId: folder, limit: 1000, offset: 0, deleted: false },
      },
    }),
  )
  const matches = page.data.filter((s) => s.name === ref)
  if (matches.length > 1)
    throw new CliError(
      'ambiguous_secret_name',
      `${matches.length} secrets are named "${ref}": give its id, or --folder`,
      EXIT.failed,
      matches.map((s) => `${s.id}  folder ${s.folderId ?? 'root'}`),
    )
  return matches[0]
}

async function requireSecret(
  ctx: CommandContext,
  client: KmsClient,
  ref: string,
  folder: string | undefined,
): Promise<Found> {
  const found = await findSecret(ctx, client, ref, folder)
  if (!found) throw new CliError('not_found', `no secret named "${ref}"`, EXIT.notFound)
  return found
}

const list: CommandNode = {
  name: 'list',
  summary: 'List secrets by name (no values)',
  help: `Usage: kms secrets list [--search TEXT] [--folder ID|root] [--label L]... [--deleted] [--limit N] [--offset N]

  --deleted   the deleted secrets that can still be restored (30 days)

Example:
  kms secrets list --search db`,
  async run(args, ctx) {
    const { values } = parseCommandArgs(
      args,
      {
        search: { type: 'string' },
        folder: { type: 'string' },
        label: { type: 'string', multiple: true },
        deleted: { type: 'boolean' },
        limit: { type: 'string' },
        offset: { type: 'string' },
      },
      { min: 0, max: 0, names: 'no arguments' },
    )
    const limit = integerFlag(values['limit'], 'limit', 1, 1000) ?? 50
    const offset = integerFlag(values['offset'], 'offset', 0, 1_000_000) ?? 0
    const client = await ctx.client()
    const page = await dataOf(
      client.api.GET('/api/v1/secrets', {
        params: {
          query: {
            search: str(values['search']),
            folderId: str(values['folder']),
            label: strings(values['label']),
            deleted: values['deleted'] === true,
            include: 'labels,folderId,updatedAt',
            limit,
            offset,
          },
        },
      }),
    )
    const more =
      page.offset + page.data.length < page.total ? `--offset ${page.offset + page.data.length}` : undefined
    return printList(ctx, page, page.data, ['id', 'name', 'version', 'labels', 'folderId', 'updatedAt'], more)
  },
}

const get: CommandNode = {
  name: 'get',
  summary: "Print a secret's value (the current one, or --version N)",
  help: `Usage: kms secrets get <secret> [--version N] [--folder ID]

<secret> is its name or id.
${FOLDER_HELP}

A terminal (and --output raw) gets the value itself; json gives the whole secret with its value.

Examples:
  export DB_PASSWORD="$(kms secrets get db-password --output raw)"
  kms secrets get db-password --version 2 --output json`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      { version: { type: 'string' }, folder: { type: 'string' } },
      SECRET_ARG,
    )
    const version = integerFlag(values['version'], 'version')
    const client = await ctx.client()
    const { id } = await requireSecret(ctx, client, positionals[0]!, str(values['folder']))
    const secret =
      version === undefined
        ? await dataOf(
            client.api.GET('/api/v1/secrets/{id}', { params: { path: { id }, query: { include: 'all' } } }),
          )
        : await dataOf(
            client.api.GET('/api/v1/secrets/{id}/versions/{version}', {
              params: { path: { id, version }, query: { include: 'all' } },
            }),
          )
    const value = secret.value ?? ''
    printAnswer({ value: { id, ...secret }, raw: value, text: value }, ctx)
    return EXIT.ok
  },
}

const set: CommandNode = {
  name: 'set',
  summary: 'Create a secret, or give it a new value (a new version)',
  help: `Usage: kms secrets set <name|id> [@file | -] [--description TEXT] [--folder ID]

The value is the file's content (@file) or standard input (- or nothing, when piped), byte for
byte: it is never taken from the command line, and nothing prompts. It must be UTF-8 text.
${FOLDER_HELP} (a new secret is created there)

Examples:
  kms secrets set db-password @password.txt
  printf '%s' "$TOKEN" | kms secrets set ci-token --description "CI deploy token"`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      { description: { type: 'string' }, folder: { type: 'string' } },
      { min: 1, max: 2, names: '<name|id> [@file | -]' },
    )
    const ref = positionals[0]!
    const value = utf8Text(await readSecretInput(positionals[1], ctx.io, 'the value'), 'the value')
    const folder = str(values['folder'])
    const description = str(values['description'])
    const client = await ctx.client()
    const found = await findSecret(ctx, client, ref, folder)
    const secret = found
      ? await dataOf(
          client.api.PATCH('/api/v1/secrets/{id}', {
            params: { path: { id: found.id } },
            body: { value, description },
          }),
        )
      : await dataOf(
          client.api.POST('/api/v1/secrets', {
            body: { name: ref, value, description, folderId: folder === 'root' ? undefined : folder },
          }),
        )
    // The answer is the secret's metadata: the value is not echoed back.
    printAnswer({ value: { id: secret.id, name: secret.name, version: secret.version } }, ctx)
    return EXIT.ok
  },
}

const history: CommandNode = {
  name: 'history',
  summary: "List a secret's kept versions (no values)",
  help: `Usage: kms secrets history <secret> [--folder ID]

Read an old value with kms secrets get <secret> --version N.

Example:
  kms secrets history db-password`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(args, { folder: { type: 'string' } }, SECRET_ARG)
    const client = await ctx.client()
    const { id } = await requireSecret(ctx, client, positionals[0]!, str(values['folder']))
    const answer = await dataOf(client.api.GET('/api/v1/secrets/{id}/versions', { params: { path: { id } } }))
    return printList(ctx, answer, answer.data, ['version', 'isCurrent', 'createdAt', 'createdBy'])
  },
}

const remove: CommandNode = {
  name: 'delete',
  summary: 'Delete a secret (restorable for 30 days, or --permanent)',
  help: `Usage: kms secrets delete <secret> [--permanent] [--folder ID]

  --permanent   purge it now with every version (no restore)

Example:
  kms secrets delete old-token`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      { permanent: { type: 'boolean' }, folder: { type: 'string' } },
      SECRET_ARG,
    )
    const client = await ctx.client()
    const { id, name } = await requireSecret(ctx, client, positionals[0]!, str(values['folder']))
    const answer = await dataOf(
      client.api.DELETE('/api/v1/secrets/{id}', {
        params: { path: { id }, query: { permanent: values['permanent'] === true } },
      }),
    )
    printAnswer({ value: answer ?? { id, name, deleted: true, permanent: true } }, ctx)
    return EXIT.ok
  },
}

export const secretsCommand: CommandNode = {
  name: 'secrets',
  summary: 'Store and read named secret values (with versions)',
  help: `Usage: kms secrets <command> [flags]

<secret> is a secret's name or its id.`,
  children: [list, get, set, history, remove],
}
