import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import type { Stats } from 'node:fs'
import { type FileHandle, link, open, rename, stat, unlink } from 'node:fs/promises'
import { constants } from 'node:os'
import { basename, dirname, join } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import { setFlagsFromString } from 'node:v8'
import {
  createServiceKeyring,
  decryptStream,
  type EncryptionContext,
  EnvelopeError,
  encryptStream,
} from '@kms/sdk'
import {
  CliError,
  type CommandContext,
  type CommandHandler,
  EXIT,
  integerFlag,
  parseCommandArgs,
  usageError,
} from '../command.ts'
import { type ProgressMeter, progressMeter, wantsProgress } from '../progress.ts'

/**
 * `kms encrypt-file` and `kms decrypt-file`: the SDK's local envelope encryption (framed
 * AES-256-GCM, docs/sdk-message-format.md) streamed between files or stdin/stdout. Memory stays
 * bounded by the SDK's frame window whatever the file's size; the service only makes and
 * unwraps the data key.
 */

export const ENCRYPT_FILE_HELP = `Usage: kms encrypt-file <in|-> [-o <out|->] --key <id|alias> [--key <id|alias>...]
                        [--context key=value...] [--frame-length N] [--force] [--quiet]

Encrypts a file locally with a fresh data key from the service (AES-256-GCM in frames, with key
commitment). The first --key makes the data key; every further --key wraps it too, so any one of
them can decrypt. The context pairs are authenticated and stored in the message; decrypt-file
can require them.

  <in>              the file to encrypt, or - for stdin
  -o, --out <out>   where to write (default <in>.kms; stdout for stdin input); - for stdout
  --key <id|alias>  a key id or alias/<name> (repeatable; at least one)
  --context k=v     an encryption context pair (repeatable)
  --frame-length N  plaintext bytes per frame, 128 to 1048576 (default 4096)
  --force           replace an existing output file
  --quiet           no progress bar (shown on a terminal only, for inputs of 8 MiB or more or from a pipe)

A file output is written to a temporary file next to it (mode 0600) and renamed into place only
when the whole input was encrypted; on failure no output file is left.`

export const DECRYPT_FILE_HELP = `Usage: kms decrypt-file <in|-> [-o <out|->] [--context key=value...] [--key <id|alias>...]
                        [--force] [--quiet]

Decrypts a message written by kms encrypt-file (or the SDK). The data key is recovered through
the service with whichever of the message's keys you may use.

  <in>              the message, or - for stdin
  -o, --out <out>   where to write (default: <in> without .kms; stdout for stdin input); - for stdout
  --context k=v     a pair the message's context must contain (repeatable): checked before any output
  --key <id|alias>  try only these keys (default: each key the message names)
  --force           replace an existing output file
  --quiet           no progress bar

To a file, nothing appears unless the WHOLE message authenticated: the plaintext goes to a
temporary file next to the target (mode 0600), renamed into place at the end and removed on any
failure. To stdout (-o -) each frame is written as soon as it authenticated, so a message
damaged or cut short after its start exits non-zero (6) AFTER the authenticated frames before the
damage were written: treat the output as valid only if the exit code is 0 (as with the AWS
Encryption CLI). No byte of a frame that failed, or of anything after it, is ever written.`

const STDIO = '-'
const EXTENSION = '.kms'

const ENCRYPT_FLAGS = {
  out: { type: 'string', short: 'o' },
  key: { type: 'string', multiple: true },
  context: { type: 'string', multiple: true },
  'frame-length': { type: 'string' },
  force: { type: 'boolean' },
  quiet: { type: 'boolean', short: 'q' },
} as const

const DECRYPT_FLAGS = {
  out: { type: 'string', short: 'o' },
  key: { type: 'string', multiple: true },
  context: { type: 'string', multiple: true },
  force: { type: 'boolean' },
  quiet: { type: 'boolean', short: 'q' },
} as const

const MIN_FRAME_LENGTH = 128
const MAX_FRAME_LENGTH = 1_048_576

/** `--context k=v` pairs as a map: the key is what precedes the first `=`, the value may hold more. */
function parseContextPairs(pairs: readonly string[]): EncryptionContext {
  const context: Record<string, string> = Object.create(null)
  for (const pair of pairs) {
    const eq = pair.indexOf('=')
    if (eq < 1) throw usageError(`--context takes key=value with a non-empty key (got "${pair}")`)
    const key = pair.slice(0, eq)
    if (Object.hasOwn(context, key)) throw usageError(`--context gives the key "${key}" twice`)
    context[key] = pair.slice(eq + 1)
  }
  return context
}

const stringList = (value: unknown): string[] => (Array.isArray(value) ? value.map(String) : [])

/** The wrapping keys as given: a UUID or alias/<name> (the service resolves both). */
function keyRefs(value: unknown): string[] {
  const keys = stringList(value)
  for (const key of keys) if (key.trim() === '') throw usageError('--key needs a key id or alias/<name>')
  return keys
}

const errnoCode = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code

function fileError(error: unknown, action: string, path: string): CliError {
  const code = errnoCode(error)
  const reason =
    code === 'ENOENT'
      ? 'no such file or directory'
      : code === 'EISDIR'
        ? 'is a directory'
        : code === 'EACCES' || code === 'EPERM'
          ? 'permission denied'
          : code === 'ENOSPC'
            ? 'no space left on the device'
            : (code ?? (error instanceof Error ? error.message : String(error)))
  return new CliError(
    action === 'read' ? 'file_unreadable' : 'file_unwritable',
    `cannot ${action} ${path}: ${reason}`,
    EXIT.data,
  )
}

interface Source {
  stream: Readable
  /** Bytes, for a regular file. */
  size: number | undefined
  stats: Stats | undefined
  isTerminal: boolean
  close(): Promise<void>
}

async function openSource(path: string, ctx: CommandContext): Promise<Source> {
  if (path === STDIO)
    return {
      stream: ctx.io.stdin,
      size: undefined,
      stats: undefined,
      isTerminal: ctx.io.stdinIsTerminal,
      close: async () => {},
    }
  let handle: FileHandle
  try {
    handle = await open(path, 'r')
  } catch (error) {
    throw fileError(error, 'read', path)
  }
  const stats = await handle.stat()
  if (stats.isDirectory()) {
    await handle.close()
    throw new CliError('file_unreadable', `cannot read ${path}: is a directory`, EXIT.data)
  }
  return {
    stream: handle.createReadStream(),
    size: stats.isFile() ? stats.size : undefined,
    stats,
    isTerminal: false,
    close: () => handle.close(),
  }
}

/** Where the output goes: a file that appears only once complete, or stdout. */
interface Sink {
  write(chunk: Uint8Array): Promise<void>
  /** Bytes handed to write so far. */
  readonly written: number
  /** The output is complete: give it its name. */
  commit(): Promise<void>
  /** The output failed: leave nothing behind. */
  discard(): Promise<void>
}

/** Frames are a few KiB: the file gets them in batches of about this size (one writev each). */
const WRITE_BATCH_BYTES = 64 * 1024

/**
 * A file output that appears only when complete: the bytes go to a temporary file in the
 * target's directory (so the final rename stays on one file system), created exclusively with
 * mode 0600 (a plaintext is nobody else's business while it is being written), synced, then
 * moved into place. Without --force the move is a hard link, which fails atomically if the
 * target appeared meanwhile (a rename would silently replace it).
 */
async function pendingFileSink(target: string, force: boolean): Promise<Sink> {
  const temp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString('hex')}.partial`)
  let handle: FileHandle
  try {
    handle = await open(temp, 'wx', 0o600)
  } catch (error) {
    throw fileError(error, 'write', target)
  }
  let batch: Uint8Array[] = []
  let batchBytes = 0
  let written = 0
  let closed = false
  const close = async () => {
    if (closed) return
    closed = true
    await handle.close()
  }
  const flush = async () => {
    const buffers = batch
    batch = []
    batchBytes = 0
    if (buffers.length > 0) await writeFully(handle, buffers)
  }
  const discard = async () => {
    await close().catch(() => {})
    await unlink(temp).catch(() => {})
  }
  return {
    get written() {
      return written
    },
    async write(chunk) {
      batch.push(chunk)
      batchBytes += chunk.length
      written += chunk.length
      if (batchBytes >= WRITE_BATCH_BYTES)
        await flush().catch((error: unknown) => Promise.reject(fileError(error, 'write', target)))
    },
    async commit() {
      try {
        await flush()
        // Durable before it gets its name: a crash never leaves a named, partly written file.
        await handle.sync()
        await close()
        if (force) await rename(temp, target)
        else await linkWithoutReplacing(temp, target)
      } catch (error) {
        await discard()
        throw error instanceof CliError ? error : fileError(error, 'write', target)
      }
    },
    discard,
  }
}

/** writev may write less than asked (a full disk says so only on the next call): go on until all is out. */
async function writeFully(handle: FileHandle, buffers: Uint8Array[]): Promise<void> {
  let pending = buffers
  while (pending.length > 0) {
    let { bytesWritten } = await handle.writev(pending)
    const rest: Uint8Array[] = []
    for (const buffer of pending) {
      if (bytesWritten >= buffer.length) bytesWritten -= buffer.length
      else {
        rest.push(buffer.subarray(bytesWritten))
        bytesWritten = 0
      }
    }
    pending = rest
  }
}

/** stdout is the process's: written with its backpressure, flushed, never ended (main may still write). */
function stdoutSink(stdout: Writable): Sink {
  let written = 0
  return {
    get written() {
      return written
    },
    async write(chunk) {
      written += chunk.length
      if (!stdout.write(chunk)) await once(stdout, 'drain')
    },
    commit: async () => {},
    discard: async () => {},
  }
}

async function linkWithoutReplacing(temp: string, target: string): Promise<void> {
  try {
    await link(temp, target)
  } catch (error) {
    if (errnoCode(error) === 'EEXIST') throw outputExists(target)
    // A file system without hard links: check, then rename (a race remains, but only there).
    if (await exists(target)) throw outputExists(target)
    await rename(temp, target)
    return
  }
  await unlink(temp)
}

const outputExists = (path: string) =>
  new CliError('output_exists', `${path} exists; give --force to replace it, or -o another name`, EXIT.data)

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return false
    throw error
  }
}

/** Refuses an existing output before any work (the final link checks again) and output = input. */
async function checkOutput(out: string, source: Source, force: boolean): Promise<void> {
  let existing: Stats
  try {
    existing = await stat(out)
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return
    throw fileError(error, 'write', out)
  }
  if (source.stats && existing.dev === source.stats.dev && existing.ino === source.stats.ino)
    throw new CliError('output_is_input', `${out} is the input itself: give -o another name`, EXIT.data)
  if (existing.isDirectory())
    throw new CliError('file_unwritable', `cannot write ${out}: is a directory`, EXIT.data)
  if (!force) throw outputExists(out)
}

/** Envelope failures are data errors (exit 6) under their own code; a no-key failure lists why per key. */
function envelopeFailure(error: EnvelopeError): CliError {
  const details = error.reasons.map(
    (r) => `${r.providerInfo}: ${r.status ? `${r.status} ` : ''}${r.code}: ${r.message}`,
  )
  return new CliError(error.code, error.message, EXIT.data, details)
}

/**
 * Source → SDK transform → sink. The transform's own backpressure (its window of frames in
 * flight) paces the reading, so memory stays bounded whatever the size. A failure anywhere stops
 * both sides; the error that caused it is the one thrown (a read error as file_unreadable, a
 * write error as file_unwritable, the SDK's EnvelopeError as it is).
 */
async function pump(
  source: Source,
  sourcePath: string,
  transform: TransformStream<Uint8Array, Uint8Array>,
  sink: Sink,
  onInput: (bytes: number) => void,
): Promise<void> {
  const writer = transform.writable.getWriter()
  const feeding = (async () => {
    try {
      for await (const chunk of source.stream) {
        onInput(chunk.length)
        await writer.write(chunk)
      }
      await writer.close()
    } catch (error) {
      const reason = errnoCode(error) ? fileError(error, 'read', sourcePath) : error
      // Errors the transform, so the reading side below stops with this same reason.
      await writer.abort(reason).catch(() => {})
      throw reason
    }
  })()
  const draining = (async () => {
    for await (const chunk of transform.readable) await sink.write(chunk)
  })()
  const [fed, drained] = await Promise.allSettled([feeding, draining])
  // The reading side holds the root cause: the transform's or the sink's error, or the source's (passed on by abort).
  if (drained.status === 'rejected') throw drained.reason
  if (fed.status === 'rejected') throw fed.reason
}

interface Transfer {
  label: string
  inPath: string
  outPath: string
  force: boolean
  quiet: boolean
  /** Built once the input and output are known good, so a usage error costs no service call. */
  transform(source: Source): Promise<TransformStream<Uint8Array, Uint8Array>>
  /** What the bytes already on stdout are, for a failure after some were written. */
  stdoutPartial(bytes: number): string
}

const SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM']

/**
 * Input → SDK transform → output, with a file output committed only on success. Ctrl-C or
 * SIGTERM stops the transfer so that the temporary file is removed too.
 */
async function transfer(spec: Transfer, ctx: CommandContext): Promise<number> {
  const source = await openSource(spec.inPath, ctx)
  let sink: Sink | undefined
  let meter: ProgressMeter | undefined
  let interrupted: NodeJS.Signals | undefined
  const onSignal = (signal: NodeJS.Signals) => {
    interrupted = signal
    source.stream.destroy(new Error(`stopped by ${signal}`))
  }
  try {
    if (spec.outPath !== STDIO) await checkOutput(spec.outPath, source, spec.force)
    const transform = await spec.transform(source)
    // From here a temporary file may exist: a signal must remove it rather than end the process.
    for (const signal of SIGNALS) process.once(signal, onSignal)
    sink =
      spec.outPath === STDIO ? stdoutSink(ctx.io.stdout) : await pendingFileSink(spec.outPath, spec.force)
    const progress = wantsProgress({
      interactive: ctx.io.interactive,
      quiet: spec.quiet,
      size: source.size,
      inputIsTerminal: source.isTerminal,
    })
    if (progress) meter = progressMeter({ label: spec.label, total: source.size, stream: ctx.io.stderr })
    keepHeapSmall()
    await pump(source, spec.inPath, transform, sink, (bytes) => meter?.add(bytes))
    meter?.finish()
    await sink.commit()
    return EXIT.ok
  } catch (error) {
    meter?.finish()
    await sink?.discard()
    if (interrupted) {
      const left = spec.outPath === STDIO ? '' : '; no output file was left'
      ctx.io.stderr.write(`kms: interrupted: ${spec.label} stopped by ${interrupted}${left}\n`)
      return 128 + (constants.signals[interrupted] ?? 0)
    }
    if (error instanceof EnvelopeError) {
      const failure = envelopeFailure(error)
      const written = sink?.written ?? 0
      if (spec.outPath === STDIO && written > 0)
        throw new CliError(
          failure.code,
          `${failure.message}; ${spec.stdoutPartial(written)}`,
          EXIT.data,
          failure.details,
        )
      throw failure
    }
    // The SDK's encrypt refuses a file that grew or shrank while it was read, or a message past 2^32 - 2 frames.
    if (error instanceof RangeError) throw new CliError('input_changed', error.message, EXIT.data)
    throw error
  } finally {
    for (const signal of SIGNALS) process.off(signal, onSignal)
    await source.close().catch(() => {})
  }
}

/**
 * V8 sizes its heap for throughput: a long stream of short-lived frame buffers (a few per 4 KiB
 * frame) lets garbage pile up far past the few MB that are live. With the launcher's small young
 * generation (bin/kms.js) a 1 GiB file still peaked at 120-150 MB RSS; tuned for size as well it
 * stays under 90 MB (test/kms-cli/files-1gb.test.ts), at the cost of about 10% in throughput. Only
 * heuristics change (no limit that could fail), and only in this process, which ends after one file.
 */
function keepHeapSmall(): void {
  setFlagsFromString('--optimize-for-size')
}

/** A refusal of the SDK's own checks (a context past the service's limits) is bad usage. */
function sdkCall<T>(make: () => T, flag: string): T {
  try {
    return make()
  } catch (error) {
    if (error instanceof TypeError) throw usageError(`${flag}: ${error.message}`)
    throw error
  }
}

export const encryptFileCommand: CommandHandler = async (args, ctx) => {
  const { values, positionals } = parseCommandArgs(args, ENCRYPT_FLAGS, { min: 1, max: 1, names: '<in|->' })
  const inPath = positionals[0]!
  const keys = keyRefs(values['key'])
  if (keys.length === 0)
    throw usageError('--key is required: the key (id or alias/<name>) that makes the data key')
  const context = parseContextPairs(stringList(values['context']))
  const frameLength = integerFlag(values['frame-length'], 'frame-length', MIN_FRAME_LENGTH, MAX_FRAME_LENGTH)
  const out =
    typeof values['out'] === 'string' ? values['out'] : inPath === STDIO ? STDIO : `${inPath}${EXTENSION}`
  if (out === STDIO && ctx.io.stdoutIsTerminal)
    throw usageError('the encrypted message is binary: give -o <file>, or redirect stdout to a file or pipe')
  return transfer(
    {
      label: `encrypting ${inPath === STDIO ? 'stdin' : basename(inPath)}`,
      inPath,
      outPath: out,
      force: values['force'] === true,
      quiet: values['quiet'] === true,
      stdoutPartial: (bytes) => `the ${bytes} bytes written to stdout are an incomplete message`,
      async transform(source) {
        const keyring = createServiceKeyring(await ctx.client(), { keyIds: keys })
        return sdkCall(
          () =>
            encryptStream(keyring, {
              context,
              ...(frameLength === undefined ? {} : { frameLength }),
              ...(source.size === undefined ? {} : { plaintextLength: source.size }),
            }),
          '--context',
        )
      },
    },
    ctx,
  )
}

export const decryptFileCommand: CommandHandler = async (args, ctx) => {
  const { values, positionals } = parseCommandArgs(args, DECRYPT_FLAGS, { min: 1, max: 1, names: '<in|->' })
  const inPath = positionals[0]!
  const keys = keyRefs(values['key'])
  const expectedContext = parseContextPairs(stringList(values['context']))
  let out: string
  if (typeof values['out'] === 'string') out = values['out']
  else if (inPath === STDIO) out = STDIO
  else if (inPath.endsWith(EXTENSION) && basename(inPath) !== EXTENSION)
    out = inPath.slice(0, -EXTENSION.length)
  else throw usageError(`${inPath} does not end in ${EXTENSION}: give the output name with -o <out|->`)
  return transfer(
    {
      label: `decrypting ${inPath === STDIO ? 'stdin' : basename(inPath)}`,
      inPath,
      outPath: out,
      force: values['force'] === true,
      quiet: values['quiet'] === true,
      stdoutPartial: (bytes) =>
        `the ${bytes} bytes written to stdout are the frames that authenticated before it: the output is incomplete`,
      async transform() {
        const client = await ctx.client()
        const keyring =
          // Without --key, every key the message names is tried (discovery): the service decides which the caller may use.
          createServiceKeyring(client, { keyIds: keys, discovery: keys.length === 0 })
        return sdkCall(() => decryptStream(keyring, { expectedContext }), '--context')
      },
    },
    ctx,
  )
}
