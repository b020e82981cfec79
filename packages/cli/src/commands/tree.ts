import { loginCommand, logoutCommand } from '../auth/login-command.ts'
import type { CommandNode } from '../command.ts'
import { aliasesCommand } from './aliases.ts'
import { apiKeysCommand } from './api-keys.ts'
import { auditCommand } from './audit.ts'
import { configCommand } from './config.ts'
import { cryptoCommands } from './crypto.ts'
import { DECRYPT_FILE_HELP, decryptFileCommand, ENCRYPT_FILE_HELP, encryptFileCommand } from './files.ts'
import { keysCommand } from './keys.ts'
import { RUN_HELP, runCommand } from './run.ts'
import { secretsCommand } from './secrets.ts'
import { tenantCommand, whoamiCommand } from './tenant.ts'

/** Every `kms` command, in the order `kms --help` lists them. */
export const COMMANDS: readonly CommandNode[] = [
  {
    name: 'login',
    summary: 'Sign in to a tenant (browser or device code)',
    help: 'Usage: kms login [--device] [--no-browser] [--timeout <seconds>]',
    run: loginCommand,
    ownHelp: true,
  },
  {
    name: 'logout',
    summary: 'End the sign-in to the tenant and delete the stored tokens',
    help: 'Usage: kms logout',
    run: logoutCommand,
    ownHelp: true,
  },
  whoamiCommand,
  tenantCommand,
  keysCommand,
  aliasesCommand,
  ...cryptoCommands,
  {
    name: 'encrypt-file',
    summary: 'Encrypt a file locally (streamed, a data key from the service)',
    help: ENCRYPT_FILE_HELP,
    run: encryptFileCommand,
  },
  {
    name: 'decrypt-file',
    summary: 'Decrypt a file written by kms encrypt-file',
    help: DECRYPT_FILE_HELP,
    run: decryptFileCommand,
  },
  secretsCommand,
  { name: 'run', summary: 'Run a command with secrets in its environment', help: RUN_HELP, run: runCommand },
  auditCommand,
  apiKeysCommand,
  configCommand,
]
