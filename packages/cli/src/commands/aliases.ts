import { dataOf } from '@kms/sdk'
import { type CommandNode, EXIT, integerFlag, parseCommandArgs, usageError } from '../command.ts'
import { printAnswer } from '../output.ts'
import { printList, str } from './shared.ts'

/** `kms aliases …`: alias/<name> names for keys (/api/v1/aliases), usable wherever a key id is. */

const COLUMNS = ['alias', 'keyId', 'updatedAt']

/** `payments` and `alias/payments` both name alias/payments. */
const aliasOf = (value: string): string => (value.startsWith('alias/') ? value : `alias/${value}`)

const list: CommandNode = {
  name: 'list',
  summary: 'List aliases in alias order (or those of one key)',
  help: `Usage: kms aliases list [--key KEY] [--limit N] [--cursor C]

Example:
  kms aliases list --key 0b6f…`,
  async run(args, ctx) {
    const { values } = parseCommandArgs(
      args,
      { key: { type: 'string' }, limit: { type: 'string' }, cursor: { type: 'string' } },
      { min: 0, max: 0, names: 'no arguments' },
    )
    const query = {
      keyId: str(values['key']),
      limit: integerFlag(values['limit'], 'limit', 1, 1000) ?? 100,
      cursor: str(values['cursor']),
    }
    const client = await ctx.client()
    const page = await dataOf(client.api.GET('/api/v1/aliases', { params: { query } }))
    return printList(
      ctx,
      page,
      page.data,
      COLUMNS,
      page.nextCursor ? `--cursor ${page.nextCursor}` : undefined,
    )
  },
}

/** `<alias> --key KEY`, as create and move take them; `what` says which key --key is. */
function aliasAndKey(args: string[], what: string): { alias: string; keyId: string } {
  const { values, positionals } = parseCommandArgs(
    args,
    { key: { type: 'string' } },
    { min: 1, max: 1, names: '<alias>' },
  )
  const keyId = str(values['key'])
  if (keyId === undefined) throw usageError(`--key is required (${what})`)
  return { alias: aliasOf(positionals[0]!), keyId }
}

const create: CommandNode = {
  name: 'create',
  summary: 'Give a key an alias',
  help: `Usage: kms aliases create <alias> --key KEY

<alias> is alias/<name> or just <name> (letters, digits, / _ -; alias/kms/ is reserved).

Example:
  kms aliases create payments --key 0b6f…
  kms encrypt --key alias/payments @card.json`,
  async run(args, ctx) {
    const { alias: name, keyId } = aliasAndKey(args, 'the key the alias names')
    const client = await ctx.client()
    const alias = await dataOf(client.api.POST('/api/v1/aliases', { body: { alias: name, keyId } }))
    printAnswer({ value: alias }, ctx)
    return EXIT.ok
  },
}

const get: CommandNode = {
  name: 'get',
  summary: 'Show an alias and the key it names',
  help: `Usage: kms aliases get <alias>

Example:
  kms aliases get payments --field keyId`,
  async run(args, ctx) {
    const { positionals } = parseCommandArgs(args, {}, { min: 1, max: 1, names: '<alias>' })
    const client = await ctx.client()
    const alias = await dataOf(
      client.api.GET('/api/v1/aliases/{alias}', { params: { path: { alias: aliasOf(positionals[0]!) } } }),
    )
    printAnswer({ value: alias }, ctx)
    return EXIT.ok
  },
}

const move: CommandNode = {
  name: 'move',
  summary: 'Point an alias at another key of the same type (rotation by alias)',
  help: `Usage: kms aliases move <alias> --key KEY

Example:
  kms aliases move payments --key 7d2a…`,
  async run(args, ctx) {
    const { alias: name, keyId } = aliasAndKey(args, 'the key the alias is to name')
    const client = await ctx.client()
    const alias = await dataOf(
      client.api.PATCH('/api/v1/aliases/{alias}', { params: { path: { alias: name } }, body: { keyId } }),
    )
    printAnswer({ value: alias }, ctx)
    return EXIT.ok
  },
}

const remove: CommandNode = {
  name: 'delete',
  summary: 'Delete an alias (the key stays)',
  help: `Usage: kms aliases delete <alias>

Example:
  kms aliases delete payments`,
  async run(args, ctx) {
    const { positionals } = parseCommandArgs(args, {}, { min: 1, max: 1, names: '<alias>' })
    const alias = aliasOf(positionals[0]!)
    const client = await ctx.client()
    await dataOf(client.api.DELETE('/api/v1/aliases/{alias}', { params: { path: { alias } } }))
    printAnswer({ value: { alias, deleted: true } }, ctx)
    return EXIT.ok
  },
}

export const aliasesCommand: CommandNode = {
  name: 'aliases',
  summary: 'Name keys with aliases (alias/<name>)',
  help: 'Usage: kms aliases <command> [flags]',
  children: [list, create, get, move, remove],
}
