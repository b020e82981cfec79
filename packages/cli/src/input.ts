import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { CliError, EXIT, type Io, usageError } from './command.ts'

/**
 * Data a command takes (a plaintext, a message, a secret value): `@path` reads the file, `-`
 * reads standard input, anything else is the argument's own UTF-8 text. Files and stdin are read
 * as bytes, so any byte value goes through unchanged.
 */

export interface Input {
  bytes: Uint8Array
  /** How curl reads the same data (`@/absolute/path`, `@-`), for --output-curl-string. */
  curlRef: string | undefined
}

async function readStdin(io: Io): Promise<Uint8Array> {
  const chunks: Buffer[] = []
  for await (const chunk of io.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
  return Buffer.concat(chunks)
}

async function readFileInput(path: string, what: string): Promise<Uint8Array> {
  if (path === '') throw usageError(`${what}: @ needs a file name (@path/to/file)`)
  try {
    return await readFile(path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    const reason =
      code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : (code ?? 'unreadable')
    throw new CliError('file_unreadable', `cannot read ${what} from ${path}: ${reason}`, EXIT.data)
  }
}

/** An argument as data: `@file`, `-` (stdin), or the text itself. */
export async function readInput(spec: string, io: Io, what: string): Promise<Input> {
  if (spec === '-') return { bytes: await readStdin(io), curlRef: '@-' }
  if (spec.startsWith('@')) {
    const path = spec.slice(1)
    return { bytes: await readFileInput(path, what), curlRef: `@${resolve(path)}` }
  }
  return { bytes: new TextEncoder().encode(spec), curlRef: undefined }
}

/**
 * A value that must not be on the command line (a secret): `@file`, `-`, or stdin when it is
 * piped in and no argument was given. Never prompts.
 */
export async function readSecretInput(spec: string | undefined, io: Io, what: string): Promise<Uint8Array> {
  if (spec === undefined) {
    if (io.stdinIsTerminal)
      throw usageError(
        `${what}: give it as @file or pipe it into stdin (-); it is never taken from the command line`,
      )
    return readStdin(io)
  }
  if (spec === '-') return readStdin(io)
  if (spec.startsWith('@')) return readFileInput(spec.slice(1), what)
  throw usageError(
    `${what} is read from @file or stdin (-), not from the command line (other users see a process's arguments)`,
  )
}

/** Bytes that must be UTF-8 text (a secret value is a string in the API). */
export function utf8Text(bytes: Uint8Array, what: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    throw new CliError('not_utf8', `${what} is not UTF-8 text (the API stores text)`, EXIT.data)
  }
}

export const base64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64')
