import { dataOf } from '@kms/sdk'
import { type CommandNode, EXIT, parseCommandArgs } from '../command.ts'
import { printAnswer } from '../output.ts'

/** `kms tenant` and `kms whoami`: GET /api/v1/tenant (and /api/v1/me for a signed-in member). */

const NO_ARGS = { min: 0, max: 0, names: 'no arguments' }

export const tenantCommand: CommandNode = {
  name: 'tenant',
  summary: 'The tenant the credentials act on',
  help: `Usage: kms tenant

Example:
  kms tenant --field id`,
  async run(args, ctx) {
    parseCommandArgs(args, {}, NO_ARGS)
    const client = await ctx.client()
    const tenant = await dataOf(client.api.GET('/api/v1/tenant'))
    printAnswer({ value: { id: tenant.id, name: tenant.name, createdAt: tenant.createdAt } }, ctx)
    return EXIT.ok
  },
}

export const whoamiCommand: CommandNode = {
  name: 'whoami',
  summary: 'Who the credentials are: API key or member, tenant, role, scopes',
  help: `Usage: kms whoami

Example:
  kms whoami --output json`,
  async run(args, ctx) {
    parseCommandArgs(args, {}, NO_ARGS)
    const client = await ctx.client()
    const tenant = await dataOf(client.api.GET('/api/v1/tenant'))
    const caller = {
      callerKind: tenant.callerKind,
      tenantId: tenant.id,
      tenantName: tenant.name,
      apiKeyId: tenant.apiKeyId,
      accountId: tenant.accountId,
      role: tenant.role,
      scopes: tenant.scopes,
    }
    if (tenant.callerKind === 'member') {
      const me = await dataOf(client.api.GET('/api/v1/me'))
      printAnswer({ value: { ...caller, email: me.email, displayName: me.displayName } }, ctx)
    } else printAnswer({ value: caller }, ctx)
    return EXIT.ok
  },
}
