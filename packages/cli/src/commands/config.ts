import { CliError, type CommandNode, EXIT, parseCommandArgs, usageError } from '../command.ts'
import { printAnswer } from '../output.ts'
import {
  checkProfileValue,
  PROFILE_KEYS,
  type ProfileKey,
  readConfigFile,
  writeConfigFile,
} from '../settings.ts'

/**
 * `kms config set|get|list`: the profile file (<config dir>/config.json). It holds addr, tenant
 * and output per profile (--profile / KMS_PROFILE choose one), never a credential.
 */

function profileKey(value: string): ProfileKey {
  if (!(PROFILE_KEYS as readonly string[]).includes(value))
    throw usageError(
      `unknown setting "${value}"; settings: ${PROFILE_KEYS.join(', ')} (credentials are never stored here)`,
    )
  return value as ProfileKey
}

const set: CommandNode = {
  name: 'set',
  summary: 'Set a value of the profile (addr, tenant, output)',
  help: `Usage: kms config set <${PROFILE_KEYS.join('|')}> <value> [--profile NAME]

Examples:
  kms config set addr https://kms.example.com
  kms config set --profile staging addr https://kms.staging.example.com`,
  async run(args, ctx) {
    const { positionals } = parseCommandArgs(args, {}, { min: 2, max: 2, names: '<setting> <value>' })
    const key = profileKey(positionals[0]!)
    const value = checkProfileValue(key, positionals[1]!, key)
    const config = await readConfigFile(ctx.settings.configDir)
    const profile = ctx.settings.profile
    config.profiles[profile] = { ...config.profiles[profile], [key]: value }
    const path = await writeConfigFile(ctx.settings.configDir, config)
    printAnswer({ value: { profile, [key]: value, file: path } }, ctx)
    return EXIT.ok
  },
}

const get: CommandNode = {
  name: 'get',
  summary: 'Print a value of the profile (exit 1 when unset)',
  help: `Usage: kms config get <${PROFILE_KEYS.join('|')}> [--profile NAME]

Prints what the profile file says (flags and KMS_* variables override it when a command runs).

Example:
  kms config get addr`,
  async run(args, ctx) {
    const { positionals } = parseCommandArgs(args, {}, { min: 1, max: 1, names: '<setting>' })
    const key = profileKey(positionals[0]!)
    const config = await readConfigFile(ctx.settings.configDir)
    const value = config.profiles[ctx.settings.profile]?.[key]
    if (value === undefined)
      throw new CliError('not_set', `${key} is not set in profile "${ctx.settings.profile}"`, EXIT.failed)
    printAnswer({ value, raw: value, text: value }, ctx)
    return EXIT.ok
  },
}

const list: CommandNode = {
  name: 'list',
  summary: 'Print every profile and its values',
  help: `Usage: kms config list

Example:
  kms config list --output json`,
  async run(args, ctx) {
    parseCommandArgs(args, {}, { min: 0, max: 0, names: 'no arguments' })
    const config = await readConfigFile(ctx.settings.configDir)
    const rows = Object.entries(config.profiles).map(([name, profile]) => ({ profile: name, ...profile }))
    printAnswer({ value: config, rows: { items: rows, columns: ['profile', ...PROFILE_KEYS] } }, ctx)
    return EXIT.ok
  },
}

export const configCommand: CommandNode = {
  name: 'config',
  summary: 'Profiles: where and how to talk to the service (no credentials)',
  help: `Usage: kms config <command>

Precedence for every setting: flag > environment (KMS_ADDR, KMS_TENANT, KMS_OUTPUT, KMS_PROFILE)
> the profile in <config dir>/config.json > default.`,
  children: [set, get, list],
}
