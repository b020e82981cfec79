import { dataOf, type KmsClient } from '@kms/sdk'
import {
  CliError,
  type CommandContext,
  type CommandNode,
  EXIT,
  type FlagSpec,
  integerFlag,
  parseCommandArgs,
  usageError,
} from '../command.ts'
import { base64, readInput } from '../input.ts'
import { type Answer, printAnswer } from '../output.ts'
import { str } from './shared.ts'

/**
 * `kms encrypt|decrypt|sign|verify|mac|mac-verify|data-key`. Data comes from an argument,
 * `@file` or `-` (stdin). encrypt and decrypt use the API's binary transport
 * (application/octet-stream): the bytes go as they are, with no Base64 on the way.
 */

const DATA_ARG = { min: 1, max: 1, names: '<data> (text, @file, or - for stdin)' }

const INPUT_HELP = `<data> is the text itself, @path (a file's bytes) or - (standard input).`

/**
 * --context: a string, or a JSON object of strings. The API binds a map as its canonical JSON
 * (keys sorted by UTF-16 code units, no whitespace), so the object is sent in that form and the
 * order its keys were typed in does not matter.
 */
function parseContext(value: unknown): { text: string; json: string | Record<string, string> } | undefined {
  if (value === undefined) return undefined
  const text = String(value)
  if (!text.trimStart().startsWith('{')) return { text, json: text }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    throw usageError('--context starting with { must be a JSON object of strings, e.g. {"tenant":"acme"}')
  }
  if (
    typeof parsed !== 'object' ||
    parsed === null ||
    Array.isArray(parsed) ||
    !Object.values(parsed).every((v) => typeof v === 'string')
  )
    throw usageError('--context as JSON must be an object whose values are strings, e.g. {"tenant":"acme"}')
  const map = parsed as Record<string, string>
  const sorted = Object.fromEntries(
    Object.keys(map)
      .sort()
      .map((k) => [k, map[k]!]),
  )
  return { text: JSON.stringify(sorted), json: sorted }
}

/** The binary transport's X-Encryption-Context header: the context's UTF-8, in Base64. */
const contextHeader = (context: { text: string } | undefined) =>
  context ? base64(new TextEncoder().encode(context.text)) : undefined

/**
 * POST raw bytes (application/octet-stream) to /encrypt or /decrypt with the binary transport's
 * headers; the answer's bytes and the key and version its headers name.
 */
async function binaryCall(
  client: KmsClient,
  path: '/api/v1/encrypt' | '/api/v1/decrypt',
  bytes: Uint8Array,
  header: Record<string, string | undefined>,
): Promise<{ bytes: Uint8Array; keyId: string | null; keyVersion: number }> {
  const result = await client.api.POST(path, {
    params: { header },
    headers: { 'content-type': 'application/octet-stream' },
    body: bytes as never,
    bodySerializer: (body: unknown) => body as string,
    parseAs: 'arrayBuffer',
  })
  return {
    bytes: new Uint8Array((await dataOf(result)) as unknown as ArrayBuffer),
    keyId: result.response.headers.get('x-key-id'),
    keyVersion: Number(result.response.headers.get('x-key-version')),
  }
}

const CONTEXT_FLAG: Record<string, FlagSpec> = { context: { type: 'string' } }
const CONTEXT_HELP = `  --context C   additional authenticated data: text, or a JSON object of strings ({"app":"billing"});
                decrypt needs the same context`

const encrypt: CommandNode = {
  name: 'encrypt',
  summary: 'Envelope-encrypt data with an Encryption key',
  help: `Usage: kms encrypt [--key KEY] [--context C] <data>

${INPUT_HELP}
  --key KEY     the key id or alias/<name> (default: the tenant's default Encryption key)
${CONTEXT_HELP}

The answer is the envelope: --output raw writes its bytes; json gives {keyId, keyVersion,
ciphertext} with the envelope in Base64 (the API's legacy-mode shape). kms decrypt takes either.

Examples:
  kms encrypt --key alias/payments @card.json --output raw > card.enc
  printf 'hello' | kms encrypt - --context '{"app":"billing"}' --field ciphertext`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      { key: { type: 'string' }, ...CONTEXT_FLAG },
      DATA_ARG,
    )
    const input = await readInput(positionals[0]!, ctx.io, 'the plaintext')
    const context = parseContext(values['context'])
    const client = await ctx.client({ curlBody: input.curlRef })
    const answer = await binaryCall(client, '/api/v1/encrypt', input.bytes, {
      'x-key-id': str(values['key']),
      'x-encryption-context': contextHeader(context),
    })
    const envelope = answer.bytes
    const value = {
      keyId: answer.keyId,
      keyVersion: answer.keyVersion,
      ciphertext: base64(envelope),
      mode: 'legacy',
    }
    printAnswer({ value, raw: envelope, whole: true }, ctx)
    return EXIT.ok
  },
}

/** The envelope in what decrypt was given: its bytes, their Base64, or the JSON of an encrypt answer. */
function envelopeOf(bytes: Uint8Array): { envelope: Uint8Array } | { json: Record<string, unknown> } {
  const text = Buffer.from(bytes).toString('latin1').trim()
  if (text.startsWith('{')) {
    let parsed: unknown
    try {
      parsed = JSON.parse(Buffer.from(bytes).toString('utf8'))
    } catch {
      throw new CliError(
        'invalid_envelope',
        'the input starts with { but is not JSON (an encrypt answer)',
        EXIT.data,
      )
    }
    if (
      typeof parsed !== 'object' ||
      parsed === null ||
      typeof (parsed as { ciphertext?: unknown }).ciphertext !== 'string'
    )
      throw new CliError(
        'invalid_envelope',
        'the JSON input has no "ciphertext" (an encrypt answer has)',
        EXIT.data,
      )
    const json = parsed as Record<string, unknown>
    // A standard-mode answer keeps its parts apart: the API's JSON decrypt takes them as they are.
    if (typeof json['encapsulatedKey'] === 'string') return { json }
    return { envelope: Buffer.from(json['ciphertext'] as string, 'base64') }
  }
  // An envelope's first byte is its format version (0x01), never a Base64 character: text is Base64.
  if (/^[A-Za-z0-9+/=\s]+$/.test(text) && text.length > 0) return { envelope: Buffer.from(text, 'base64') }
  return { envelope: bytes }
}

/**
 * A terminal's table shows a plaintext that is printable text as that text; anything else (and
 * json) shows it in Base64, and raw writes its bytes.
 */
function plaintextAnswer(value: { plaintext: string }, plaintext: Uint8Array): Answer {
  let text: string | undefined
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(plaintext)
  } catch {}
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is looked for
  const printable = text !== undefined && !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text)
  return { value, raw: plaintext, whole: true, ...(printable ? { text } : {}) }
}

const decrypt: CommandNode = {
  name: 'decrypt',
  summary: 'Decrypt an envelope made by kms encrypt (or the API)',
  help: `Usage: kms decrypt [--key KEY] [--key-version N] [--context C] <envelope>

<envelope> is an argument, @path or - (stdin) holding the envelope's bytes (kms encrypt --output raw),
its Base64 (--field ciphertext), or the JSON of an encrypt answer (either mode).
  --key, --key-version   cross-checks of what the envelope names (it names its key itself)
${CONTEXT_HELP}

--output raw writes the plaintext's bytes exactly; json gives {keyId, keyVersion, plaintext} in Base64;
a table (the default on a terminal) shows a plaintext that is printable text as that text.

Examples:
  kms decrypt @card.enc --output raw > card.json
  kms encrypt 'hello' --output raw | kms decrypt - --output raw`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      { key: { type: 'string' }, 'key-version': { type: 'string' }, ...CONTEXT_FLAG },
      { ...DATA_ARG, names: '<envelope> (Base64 text, @file, or - for stdin)' },
    )
    const input = await readInput(positionals[0]!, ctx.io, 'the envelope')
    const context = parseContext(values['context'])
    const keyId = str(values['key'])
    const keyVersion = integerFlag(values['key-version'], 'key-version')
    const found = envelopeOf(input.bytes)
    if ('json' in found) {
      const client = await ctx.client()
      const { json } = found
      const answer = await dataOf(
        client.api.POST('/api/v1/decrypt', {
          body: {
            ciphertext: json['ciphertext'] as string,
            encapsulatedKey: json['encapsulatedKey'] as string,
            nonce: str(json['nonce']),
            tag: str(json['tag']),
            keyId: keyId ?? str(json['keyId']),
            keyVersion:
              keyVersion ?? (typeof json['keyVersion'] === 'number' ? json['keyVersion'] : undefined),
            context: context?.json,
          },
        }),
      )
      printAnswer(plaintextAnswer(answer, Buffer.from(answer.plaintext, 'base64')), ctx)
      return EXIT.ok
    }
    // The bytes the binary transport sends are the file itself only when the file held them raw.
    const curlBody = found.envelope === input.bytes ? input.curlRef : undefined
    const client = await ctx.client({ curlBody })
    const answer = await binaryCall(client, '/api/v1/decrypt', found.envelope, {
      'x-key-id': keyId,
      'x-key-version': keyVersion === undefined ? undefined : String(keyVersion),
      'x-encryption-context': contextHeader(context),
    })
    const plaintext = answer.bytes
    const value = {
      keyId: answer.keyId,
      keyVersion: answer.keyVersion,
      plaintext: base64(plaintext),
    }
    printAnswer(plaintextAnswer(value, plaintext), ctx)
    return EXIT.ok
  },
}

const SIGNING_FLAGS: Record<string, FlagSpec> = {
  key: { type: 'string' },
  digest: { type: 'boolean' },
  'rsa-padding': { type: 'string', choices: ['PSS', 'PKCS1'] },
  'signature-format': { type: 'string', choices: ['DER', 'P1363'] },
  'salt-length': { type: 'string' },
  'signature-context': { type: 'string' },
}

const SIGNING_HELP = `  --key KEY                 the Signing key: id or alias/<name> (default: the tenant's default Signing key)
  --digest                  <data> is already a digest (RSA and ECDSA: SHA-256/384/512 as the key)
  --rsa-padding PSS|PKCS1   RSA keys (default PSS)
  --signature-format DER|P1363   ECDSA keys (default DER)
  --salt-length N           RSA-PSS salt length in bytes (default 32)
  --signature-context C     ML-DSA and SLH-DSA: the context string (text, @file or -)`

async function signingOptions(values: Record<string, unknown>, ctx: CommandContext) {
  const signatureContext =
    values['signature-context'] === undefined
      ? undefined
      : base64((await readInput(String(values['signature-context']), ctx.io, 'the signature context')).bytes)
  return {
    keyId: str(values['key']),
    messageType: values['digest'] ? ('DIGEST' as const) : undefined,
    rsaPadding: str(values['rsa-padding']) as 'PSS' | 'PKCS1' | undefined,
    signatureFormat: str(values['signature-format']) as 'DER' | 'P1363' | undefined,
    saltLength: integerFlag(values['salt-length'], 'salt-length', 0, 478),
    signatureContext,
  }
}

const sign: CommandNode = {
  name: 'sign',
  summary: 'Sign data with a Signing key',
  help: `Usage: kms sign [--key KEY] [--versioned] [signing flags] <data>

${INPUT_HELP}
${SIGNING_HELP}
  --versioned               answer kms:v<version>:<Base64>, which names the key version for verify

--output raw writes the signature's bytes (the versioned form as its text); json gives the API's answer.

Examples:
  kms sign --key alias/releases @release.tar.gz --field signature > release.sig
  kms sign --key alias/releases @release.tar.gz --output raw > release.sig.bin`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      { ...SIGNING_FLAGS, versioned: { type: 'boolean' } },
      DATA_ARG,
    )
    const input = await readInput(positionals[0]!, ctx.io, 'the message')
    const options = await signingOptions(values, ctx)
    const client = await ctx.client()
    const answer = await dataOf(
      client.api.POST('/api/v1/sign', {
        body: {
          ...options,
          message: base64(input.bytes),
          signatureEncoding: values['versioned'] ? 'versioned' : undefined,
        },
      }),
    )
    const raw = answer.signature.startsWith('kms:v')
      ? answer.signature
      : Buffer.from(answer.signature, 'base64')
    printAnswer({ value: answer, raw, whole: true }, ctx)
    return EXIT.ok
  },
}

/**
 * A signature or MAC given on the command line or in a file: its Base64 (or kms:v<n>: form)
 * as text, or its raw bytes (what --output raw wrote), which are sent as Base64.
 */
async function signatureArgument(spec: string, ctx: CommandContext, what: string): Promise<string> {
  if (!spec.startsWith('@') && spec !== '-') return spec.trim()
  const { bytes } = await readInput(spec, ctx.io, what)
  const text = Buffer.from(bytes).toString('latin1').trim()
  if (/^(kms:v\d+:)?[A-Za-z0-9+/]+={0,2}$/.test(text)) return text
  return base64(bytes)
}

/** A failed check: the answer is printed, then `kms: <code>: …` and exit 1. */
function checkResult(ctx: CommandContext, answer: { valid: boolean }, code: string, what: string): number {
  printAnswer({ value: answer, raw: answer.valid ? 'valid' : 'invalid' }, ctx)
  if (answer.valid) return EXIT.ok
  ctx.io.stderr.write(`kms: ${code}: ${what}\n`)
  return EXIT.failed
}

const verify: CommandNode = {
  name: 'verify',
  summary: 'Verify a signature (exit 0 valid, 1 invalid)',
  help: `Usage: kms verify --signature SIG [--key KEY] [--key-version N] [signing flags] <data>

${INPUT_HELP}
  --signature SIG           Base64, kms:v<n>:<Base64>, or @file / - (that text, or the raw bytes)
  --key-version N           the version that signed (default: the one a versioned signature names,
                            else every version, newest first)
${SIGNING_HELP}

Exit code 0: valid; 1: invalid (kms: invalid_signature on stderr).

Example:
  kms verify --key alias/releases --signature @release.sig @release.tar.gz`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      { ...SIGNING_FLAGS, signature: { type: 'string' }, 'key-version': { type: 'string' } },
      DATA_ARG,
    )
    if (values['signature'] === undefined) throw usageError('--signature is required')
    if (values['signature'] === '-' && positionals[0] === '-')
      throw usageError('the signature and the data cannot both come from stdin')
    const signature = await signatureArgument(String(values['signature']), ctx, 'the signature')
    const input = await readInput(positionals[0]!, ctx.io, 'the message')
    const options = await signingOptions(values, ctx)
    const keyVersion = integerFlag(values['key-version'], 'key-version')
    const client = await ctx.client()
    const answer = await dataOf(
      client.api.POST('/api/v1/verify', {
        body: { ...options, message: base64(input.bytes), signature, keyVersion },
      }),
    )
    return checkResult(ctx, answer, 'invalid_signature', 'the signature does not match the data and key')
  },
}

const MAC_HELP = `  --key KEY      the HMAC key: id or alias/<name> (required)
  --length N     truncate the MAC to its first N bytes (16 up to the full length)`

const mac: CommandNode = {
  name: 'mac',
  summary: 'Compute an HMAC with an HMAC key',
  help: `Usage: kms mac --key KEY [--length N] <data>

${INPUT_HELP}
${MAC_HELP}

--output raw writes the MAC's bytes; --field mac its Base64.

Example:
  kms mac --key alias/webhooks @payload.json --field mac`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      { key: { type: 'string' }, length: { type: 'string' } },
      DATA_ARG,
    )
    const keyId = str(values['key'])
    if (keyId === undefined) throw usageError('--key is required (an HMAC key)')
    const macLength = integerFlag(values['length'], 'length', 16, 64)
    const input = await readInput(positionals[0]!, ctx.io, 'the data')
    const client = await ctx.client()
    const answer = await dataOf(
      client.api.POST('/api/v1/keys/{keyId}/mac', {
        params: { path: { keyId } },
        body: { data: base64(input.bytes), macLength },
      }),
    )
    printAnswer({ value: answer, raw: Buffer.from(answer.mac, 'base64'), whole: true }, ctx)
    return EXIT.ok
  },
}

const macVerify: CommandNode = {
  name: 'mac-verify',
  summary: 'Check an HMAC in constant time (exit 0 valid, 1 invalid)',
  help: `Usage: kms mac-verify --key KEY --mac MAC [--key-version N] [--length N] <data>

${INPUT_HELP}
${MAC_HELP}
  --mac MAC      Base64, or @file / - (that text, or the raw bytes)
  --key-version  the version that computed it (default: the current one)

Example:
  kms mac-verify --key alias/webhooks --mac "$MAC" @payload.json`,
  async run(args, ctx) {
    const { values, positionals } = parseCommandArgs(
      args,
      {
        key: { type: 'string' },
        mac: { type: 'string' },
        length: { type: 'string' },
        'key-version': { type: 'string' },
      },
      DATA_ARG,
    )
    const keyId = str(values['key'])
    if (keyId === undefined) throw usageError('--key is required (an HMAC key)')
    if (values['mac'] === undefined) throw usageError('--mac is required')
    if (values['mac'] === '-' && positionals[0] === '-')
      throw usageError('the MAC and the data cannot both come from stdin')
    const macValue = await signatureArgument(String(values['mac']), ctx, 'the MAC')
    const macLength = integerFlag(values['length'], 'length', 16, 64)
    const keyVersion = integerFlag(values['key-version'], 'key-version')
    const input = await readInput(positionals[0]!, ctx.io, 'the data')
    const client = await ctx.client()
    const answer = await dataOf(
      client.api.POST('/api/v1/keys/{keyId}/mac/verify', {
        params: { path: { keyId } },
        body: { data: base64(input.bytes), mac: macValue, macLength, keyVersion },
      }),
    )
    return checkResult(ctx, answer, 'invalid_mac', 'the MAC does not match the data and key')
  },
}

const dataKey: CommandNode = {
  name: 'data-key',
  summary: 'Generate a data key: in plaintext and wrapped by a key',
  help: `Usage: kms data-key [--key KEY] [--bytes 16|24|32] [--context C] [--wrapped-only]

  --key KEY        the wrapping key (default: the tenant's default Encryption key; --bytes,
                   --context and --wrapped-only need one)
  --bytes N        16, 24 or 32 (default 32)
${CONTEXT_HELP.replace('decrypt', 'unwrapping')}
  --wrapped-only   leave the plaintext out of the answer (generate now, unwrap where it is used)

The answer has plaintextDek (Base64: keep it in memory only) and encryptedDek (store it with the data).

Examples:
  kms data-key --key alias/payments --output json
  kms data-key --key alias/payments --wrapped-only --field encryptedDek`,
  async run(args, ctx) {
    const { values } = parseCommandArgs(
      args,
      {
        key: { type: 'string' },
        bytes: { type: 'string', choices: ['16', '24', '32'] },
        'wrapped-only': { type: 'boolean' },
        ...CONTEXT_FLAG,
      },
      { min: 0, max: 0, names: 'no arguments' },
    )
    const keyId = str(values['key'])
    const context = parseContext(values['context'])
    const bytes = values['bytes'] === undefined ? undefined : (Number(values['bytes']) as 16 | 24 | 32)
    if (keyId === undefined && (bytes !== undefined || context !== undefined || values['wrapped-only']))
      throw usageError(
        '--bytes, --context and --wrapped-only need --key (the tenant default answers 32 bytes, in plaintext)',
      )
    const client = await ctx.client()
    if (keyId === undefined) {
      const answer = await dataOf(client.api.POST('/api/v1/generate-data-key', { body: {} }))
      printAnswer({ value: answer, whole: true }, ctx)
      return EXIT.ok
    }
    const answer = await dataOf(
      client.api.POST('/api/v1/keys/{keyId}/data-key', {
        params: { path: { keyId } },
        body: {
          keyBytes: bytes,
          context: context?.json,
          withPlaintext: values['wrapped-only'] ? false : undefined,
        },
      }),
    )
    printAnswer({ value: answer, whole: true }, ctx)
    return EXIT.ok
  },
}

export const cryptoCommands: readonly CommandNode[] = [
  encrypt,
  decrypt,
  sign,
  verify,
  mac,
  macVerify,
  dataKey,
]
