import { useMutation } from '@tanstack/react-query'
import { type FormEvent, type ReactNode, useEffect, useRef, useState } from 'react'
import { api, must, type Schemas } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { CopyButton } from '../../ui/CopyButton.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { CheckboxInput, SelectInput, TextInput } from '../../ui/Field.tsx'
import { base64ToText, textToBase64 } from './base64.ts'

type Key = Schemas['KeyView']

/** The text of an answer's Base64 bytes, or the Base64 itself with a note when it is not text. */
function TextOf(props: { base64: string; label: string }) {
  const text = base64ToText(props.base64)
  return (
    <>
      <h3>{props.label}</h3>
      {text !== undefined ? (
        <pre className="try-output">
          <code>{text}</code>
        </pre>
      ) : (
        <>
          <p className="muted">Not UTF-8 text; the bytes as Base64:</p>
          <pre className="try-output">
            <code>{props.base64}</code>
          </pre>
        </>
      )}
    </>
  )
}

/** An answer of the API as the person can copy it (JSON, as the next call takes it). */
function AnswerJson(props: { value: unknown; label: string }) {
  const json = JSON.stringify(props.value, null, 2)
  return (
    <>
      <h3>{props.label}</h3>
      <pre className="try-output try-answer">
        <code>{json}</code>
      </pre>
      <CopyButton value={json} label="Copy the answer" />
    </>
  )
}

/** Why the caller cannot run the operation (scope first, then the key's state), or undefined. */
function useBlocked(key: Key, kind: 'produce' | 'consume', scopes: readonly string[]): string | undefined {
  const { can } = useWorkspace()
  if (!scopes.some((scope) => can(scope))) return needsScope(scopes[0]!)
  if (kind === 'produce' && key.state !== 'Active')
    return `The key is ${key.state}: only an Active key makes new ciphertexts, signatures, MACs and data keys`
  if (kind === 'consume' && key.state === 'Destroyed') return 'The key is Destroyed: it can do nothing'
  return undefined
}

const ENCRYPT_SCOPES = ['encryption:write', 'encrypt:invoke'] as const
const CRYPTO_SCOPES = ['encryption:write'] as const

/** A positive key version typed by the person: '' is none; anything else is an error text. */
function parseVersion(text: string): { version?: number; error?: string } {
  const trimmed = text.trim()
  if (trimmed === '') return {}
  const version = Number(trimmed)
  return Number.isInteger(version) && version >= 1
    ? { version }
    : { error: 'A key version is a whole number from 1' }
}

function Form(props: { onSubmit(): void; children: ReactNode; label: string }) {
  return (
    <form
      className="stack try-form"
      aria-label={props.label}
      onSubmit={(event: FormEvent) => {
        event.preventDefault()
        props.onSubmit()
      }}
    >
      {props.children}
    </form>
  )
}

/**
 * A panel's heading, which takes the focus when an answer was carried over to it ("Decrypt this",
 * "Verify this"): the panel the focus was in is hidden by then.
 */
function PanelHeading(props: { children: ReactNode; carried: number; active: boolean }) {
  const heading = useRef<HTMLHeadingElement>(null)
  const handled = useRef(0)
  useEffect(() => {
    // Once the panel shows (the tab follows the URL, a moment after the answer was carried).
    if (props.active && props.carried > handled.current) {
      handled.current = props.carried
      heading.current?.focus()
    }
  }, [props.carried, props.active])
  return (
    <h2 ref={heading} tabIndex={-1} className="try-panel-heading">
      {props.children}
    </h2>
  )
}

// Encrypt and decrypt

export interface DecryptInput {
  /** The encrypt answer, as JSON text. */
  answer: string
  context: string
}

export function EncryptPanel(props: { keyView: Key; onDecrypt(input: DecryptInput): void }) {
  const { keyView } = props
  const [text, setText] = useState('')
  const [context, setContext] = useState('')
  const blocked = useBlocked(keyView, 'produce', ENCRYPT_SCOPES)
  const body: Schemas['EncryptRequest'] = {
    keyId: keyView.id,
    plaintext: textToBase64(text),
    ...(context !== '' ? { context } : {}),
  }
  const encrypt = useMutation({
    mutationFn: async (request: Schemas['EncryptRequest']) =>
      must(await api.POST('/api/v1/encrypt', { body: request })),
  })
  return (
    <>
      <h2>Encrypt text</h2>
      <p className="muted">
        The text is sent as the Base64 of its UTF-8 bytes. The answer is what decrypt takes back, with the
        same context.
      </p>
      <Form label="Encrypt" onSubmit={() => encrypt.mutate(body)}>
        <TextInput label="Text to encrypt" multiline rows={4} value={text} onChange={setText} />
        <TextInput
          label="Context (optional)"
          description="Additional authenticated data, e.g. order=1042: decrypting needs the very same text."
          value={context}
          onChange={setContext}
        />
        <div className="row">
          <Button type="submit" variant="primary" disabledReason={blocked} isDisabled={encrypt.isPending}>
            {encrypt.isPending ? 'Encrypting…' : 'Encrypt'}
          </Button>
        </div>
      </Form>
      <ErrorAlert error={encrypt.error} title="Encrypt failed" />
      <EquivalentRequest method="POST" path="/api/v1/encrypt" body={body} />
      {encrypt.data && (
        <div className="try-result">
          <Notice tone="success">
            Encrypted with {keyView.name}, key version {encrypt.data.keyVersion}.
          </Notice>
          <AnswerJson value={encrypt.data} label="Encrypt answer" />
          <div className="row try-next">
            <Button
              variant="secondary"
              onPress={() =>
                props.onDecrypt({
                  answer: JSON.stringify(encrypt.data, null, 2),
                  // This form sends a context as text only (the API also takes a map).
                  context: typeof encrypt.variables?.context === 'string' ? encrypt.variables.context : '',
                })
              }
            >
              Decrypt this
            </Button>
          </div>
        </div>
      )}
    </>
  )
}

const ENVELOPE_FIELDS = [
  'ciphertext',
  'encapsulatedKey',
  'nonce',
  'tag',
  'keyId',
  'keyVersion',
  'mode',
] as const

/** The decrypt body from an encrypt answer pasted as JSON (its envelope fields), or what is wrong. */
function envelopeOf(answer: string): {
  envelope?: Omit<Schemas['DecryptRequest'], 'context'>
  error?: string
} {
  if (answer.trim() === '') return {}
  let parsed: unknown
  try {
    parsed = JSON.parse(answer)
  } catch {
    return { error: 'Not JSON: paste the whole answer of an encrypt, braces included' }
  }
  if (
    typeof parsed !== 'object' ||
    parsed === null ||
    typeof (parsed as Record<string, unknown>)['ciphertext'] !== 'string'
  )
    return { error: 'The answer has no ciphertext: paste the JSON an encrypt answered' }
  const fields = parsed as Record<string, unknown>
  const envelope = Object.fromEntries(
    ENVELOPE_FIELDS.filter((field) => fields[field] !== undefined).map((field) => [field, fields[field]]),
  ) as Omit<Schemas['DecryptRequest'], 'context'>
  return { envelope }
}

export function DecryptPanel(props: {
  keyView: Key
  input: DecryptInput
  carried: number
  active: boolean
  onInput(input: DecryptInput): void
}) {
  const { keyView, input } = props
  const blocked = useBlocked(keyView, 'consume', ENCRYPT_SCOPES)
  const [touched, setTouched] = useState(false)
  const parsed = envelopeOf(input.answer)
  const body: Schemas['DecryptRequest'] = {
    ...(parsed.envelope ?? { ciphertext: '<ciphertext from the encrypt answer>' }),
    ...(input.context !== '' ? { context: input.context } : {}),
  }
  const decrypt = useMutation({
    mutationFn: async (request: Schemas['DecryptRequest']) =>
      must(await api.POST('/api/v1/decrypt', { body: request })),
  })
  const change = (next: DecryptInput) => {
    decrypt.reset()
    props.onInput(next)
  }
  const answerError =
    parsed.error ?? (touched && !parsed.envelope ? 'Paste the answer of an encrypt' : undefined)
  return (
    <>
      <PanelHeading carried={props.carried} active={props.active}>
        Decrypt
      </PanelHeading>
      <p className="muted">
        Paste what encrypt answered (or use “Decrypt this” on the Encrypt tab) and give the context it was
        encrypted with. Any mismatch is the same error: the API does not say which part was wrong.
      </p>
      <Form
        label="Decrypt"
        onSubmit={() => {
          setTouched(true)
          if (parsed.envelope) decrypt.mutate(body)
        }}
      >
        <TextInput
          label="Encrypt answer (JSON)"
          multiline
          rows={8}
          value={input.answer}
          error={answerError}
          description="ciphertext, encapsulatedKey, nonce, tag, keyId and keyVersion, as encrypt answered them."
          onChange={(answer) => change({ ...input, answer })}
        />
        <TextInput
          label="Context"
          description="The context given to encrypt; empty if none was."
          value={input.context}
          onChange={(context) => change({ ...input, context })}
        />
        <div className="row">
          <Button type="submit" variant="primary" disabledReason={blocked} isDisabled={decrypt.isPending}>
            {decrypt.isPending ? 'Decrypting…' : 'Decrypt'}
          </Button>
        </div>
      </Form>
      <ErrorAlert error={decrypt.error} title="Decrypt failed" />
      <EquivalentRequest method="POST" path="/api/v1/decrypt" body={body} />
      {decrypt.data && (
        <div className="try-result">
          <Notice tone="success">Decrypted with key version {decrypt.data.keyVersion}.</Notice>
          <TextOf base64={decrypt.data.plaintext} label="Decrypted text" />
        </div>
      )}
    </>
  )
}

// Data keys

export function DataKeyPanel(props: { keyView: Key }) {
  const { keyView } = props
  const [keyBytes, setKeyBytes] = useState<16 | 24 | 32>(32)
  const [withPlaintext, setWithPlaintext] = useState(true)
  const [context, setContext] = useState('')
  const [revealed, setRevealed] = useState(false)
  const blocked = useBlocked(keyView, 'produce', CRYPTO_SCOPES)
  const body: Schemas['DataKeyRequest'] = {
    keyBytes,
    withPlaintext,
    ...(context !== '' ? { context } : {}),
  }
  const path = `/api/v1/keys/${keyView.id}/data-key`
  const generate = useMutation({
    mutationFn: async (request: Schemas['DataKeyRequest']) =>
      must(
        await api.POST('/api/v1/keys/{keyId}/data-key', {
          params: { path: { keyId: keyView.id } },
          body: request,
        }),
      ),
    onMutate: () => setRevealed(false),
    // The plaintext data key is not kept once the panel is gone.
    gcTime: 0,
  })
  const dataKey = generate.data
  return (
    <>
      <h2>Generate a data key</h2>
      <p className="muted">
        A fresh random key for encrypting locally: use the plaintext data key, discard it, and store the
        encrypted one; unwrap recovers it with the same context.
      </p>
      <Form label="Generate a data key" onSubmit={() => generate.mutate(body)}>
        <SelectInput
          label="Length"
          value={String(keyBytes)}
          options={[
            { id: '32', label: '32 bytes (AES-256)' },
            { id: '24', label: '24 bytes (AES-192)' },
            { id: '16', label: '16 bytes (AES-128)' },
          ]}
          onChange={(value) => setKeyBytes(Number(value) as 16 | 24 | 32)}
        />
        <TextInput
          label="Context (optional)"
          description="Needed again, as it is, to unwrap the data key."
          value={context}
          onChange={setContext}
        />
        <CheckboxInput
          label="Include the plaintext data key in the answer"
          isSelected={withPlaintext}
          onChange={setWithPlaintext}
        />
        <div className="row">
          <Button type="submit" variant="primary" disabledReason={blocked} isDisabled={generate.isPending}>
            {generate.isPending ? 'Generating…' : 'Generate data key'}
          </Button>
        </div>
      </Form>
      <ErrorAlert error={generate.error} title="Generating a data key failed" />
      <EquivalentRequest method="POST" path={path} body={body} />
      {dataKey && (
        <div className="try-result">
          <Notice tone="success">
            A {dataKey.keyBytes}-byte data key, wrapped by key version {dataKey.keyVersion}.
          </Notice>
          <h3>Encrypted data key</h3>
          <pre className="try-output">
            <code>{dataKey.encryptedDek}</code>
          </pre>
          <CopyButton value={dataKey.encryptedDek} label="Copy the encrypted data key" />
          <h3>Plaintext data key</h3>
          {dataKey.plaintextDek === undefined ? (
            <p className="muted">Not asked for: the answer carries only the encrypted data key.</p>
          ) : (
            <>
              {revealed ? (
                <pre className="try-output">
                  <code data-testid="plaintext-dek">{dataKey.plaintextDek}</code>
                </pre>
              ) : (
                <p className="try-hidden">
                  <span aria-hidden="true">••••••••••••••••</span>
                  <span className="visually-hidden">Hidden</span>{' '}
                  <span className="muted">(Base64, hidden until you reveal it)</span>
                </p>
              )}
              <div className="row">
                <Button variant="secondary" onPress={() => setRevealed(!revealed)}>
                  {revealed ? 'Hide data key' : 'Reveal data key'}
                </Button>
                <CopyButton value={dataKey.plaintextDek} label="Copy the data key" />
              </div>
            </>
          )}
        </div>
      )}
    </>
  )
}

// Signatures

type RsaPadding = 'PSS' | 'PKCS1'
type SignatureFormat = 'DER' | 'P1363'

export interface VerifyInput {
  message: string
  signature: string
  keyVersion: string
  rsaPadding: RsaPadding
  signatureFormat: SignatureFormat
}

const isRsa = (key: Key) => key.algorithm.startsWith('RSA-')
const isEcdsa = (key: Key) => key.algorithm.startsWith('EC-')

/** The scheme options the key's algorithm takes (RSA padding, ECDSA encoding), as selects. */
function SchemeOptions(props: {
  keyView: Key
  rsaPadding: RsaPadding
  signatureFormat: SignatureFormat
  onRsaPadding(value: RsaPadding): void
  onSignatureFormat(value: SignatureFormat): void
}) {
  if (isRsa(props.keyView))
    return (
      <SelectInput
        label="RSA padding"
        value={props.rsaPadding}
        options={[
          { id: 'PSS', label: 'RSASSA-PSS (SHA-256)', description: 'The default' },
          { id: 'PKCS1', label: 'RSASSA-PKCS1-v1_5 (SHA-256)' },
        ]}
        onChange={(value) => props.onRsaPadding(value as RsaPadding)}
      />
    )
  if (isEcdsa(props.keyView))
    return (
      <SelectInput
        label="Signature encoding"
        value={props.signatureFormat}
        options={[
          { id: 'DER', label: 'DER', description: 'The default' },
          { id: 'P1363', label: 'IEEE P1363 (r ‖ s)' },
        ]}
        onChange={(value) => props.onSignatureFormat(value as SignatureFormat)}
      />
    )
  return null
}

const schemeBody = (key: Key, rsaPadding: RsaPadding, signatureFormat: SignatureFormat) => ({
  ...(isRsa(key) ? { rsaPadding } : {}),
  ...(isEcdsa(key) ? { signatureFormat } : {}),
})

export function SignPanel(props: { keyView: Key; onVerify(input: VerifyInput): void }) {
  const { keyView } = props
  const [message, setMessage] = useState('')
  const [rsaPadding, setRsaPadding] = useState<RsaPadding>('PSS')
  const [signatureFormat, setSignatureFormat] = useState<SignatureFormat>('DER')
  const blocked = useBlocked(keyView, 'produce', CRYPTO_SCOPES)
  const body: Schemas['SignRequest'] = {
    keyId: keyView.id,
    message: textToBase64(message),
    ...schemeBody(keyView, rsaPadding, signatureFormat),
  }
  const sign = useMutation({
    mutationFn: async (request: { body: Schemas['SignRequest']; message: string }) =>
      must(await api.POST('/api/v1/sign', { body: request.body })),
  })
  return (
    <>
      <h2>Sign a message</h2>
      <p className="muted">The message is signed as the UTF-8 bytes of the text (sent as Base64).</p>
      <Form label="Sign" onSubmit={() => sign.mutate({ body, message })}>
        <TextInput label="Message" multiline rows={4} value={message} onChange={setMessage} />
        <SchemeOptions
          keyView={keyView}
          rsaPadding={rsaPadding}
          signatureFormat={signatureFormat}
          onRsaPadding={setRsaPadding}
          onSignatureFormat={setSignatureFormat}
        />
        <div className="row">
          <Button type="submit" variant="primary" disabledReason={blocked} isDisabled={sign.isPending}>
            {sign.isPending ? 'Signing…' : 'Sign'}
          </Button>
        </div>
      </Form>
      <ErrorAlert error={sign.error} title="Sign failed" />
      <EquivalentRequest method="POST" path="/api/v1/sign" body={body} />
      {sign.data && (
        <div className="try-result">
          <Notice tone="success">
            Signed with key version {sign.data.keyVersion} ({sign.data.signingScheme}).
          </Notice>
          <h3>Signature (Base64)</h3>
          <pre className="try-output">
            <code data-testid="signature">{sign.data.signature}</code>
          </pre>
          <div className="row try-next">
            <CopyButton value={sign.data.signature} label="Copy the signature" />
            <Button
              variant="secondary"
              onPress={() =>
                props.onVerify({
                  message: sign.variables?.message ?? '',
                  signature: sign.data.signature,
                  keyVersion: String(sign.data.keyVersion),
                  rsaPadding,
                  signatureFormat,
                })
              }
            >
              Verify this
            </Button>
          </div>
        </div>
      )}
    </>
  )
}

export function VerifyPanel(props: {
  keyView: Key
  input: VerifyInput
  carried: number
  active: boolean
  onInput(input: VerifyInput): void
}) {
  const { keyView, input } = props
  const blocked = useBlocked(keyView, 'consume', CRYPTO_SCOPES)
  const version = parseVersion(input.keyVersion)
  const body: Schemas['VerifyRequest'] = {
    keyId: keyView.id,
    ...(version.version !== undefined ? { keyVersion: version.version } : {}),
    message: textToBase64(input.message),
    signature: input.signature.trim(),
    ...schemeBody(keyView, input.rsaPadding, input.signatureFormat),
  }
  const verify = useMutation({
    mutationFn: async (request: Schemas['VerifyRequest']) =>
      must(await api.POST('/api/v1/verify', { body: request })),
  })
  const change = (next: Partial<VerifyInput>) => {
    verify.reset()
    props.onInput({ ...input, ...next })
  }
  return (
    <>
      <PanelHeading carried={props.carried} active={props.active}>
        Verify a signature
      </PanelHeading>
      <p className="muted">The answer is valid or not valid; a malformed signature is simply not valid.</p>
      <Form label="Verify" onSubmit={() => version.error === undefined && verify.mutate(body)}>
        <TextInput
          label="Message"
          multiline
          rows={4}
          value={input.message}
          onChange={(message) => change({ message })}
        />
        <TextInput
          label="Signature (Base64)"
          multiline
          rows={3}
          value={input.signature}
          onChange={(signature) => change({ signature })}
        />
        <TextInput
          label="Key version (optional)"
          description="The version that signed; empty for the current version."
          value={input.keyVersion}
          error={version.error}
          onChange={(keyVersion) => change({ keyVersion })}
        />
        <SchemeOptions
          keyView={keyView}
          rsaPadding={input.rsaPadding}
          signatureFormat={input.signatureFormat}
          onRsaPadding={(rsaPadding) => change({ rsaPadding })}
          onSignatureFormat={(signatureFormat) => change({ signatureFormat })}
        />
        <div className="row">
          <Button type="submit" variant="primary" disabledReason={blocked} isDisabled={verify.isPending}>
            {verify.isPending ? 'Verifying…' : 'Verify'}
          </Button>
        </div>
      </Form>
      <ErrorAlert error={verify.error} title="Verify failed" />
      <EquivalentRequest method="POST" path="/api/v1/verify" body={body} />
      {verify.data && (
        <Validity valid={verify.data.valid} version={verify.data.keyVersion} what="signature" />
      )}
    </>
  )
}

function Validity(props: { valid: boolean; version: number; what: string }) {
  return props.valid ? (
    <Notice tone="success">
      <strong>Valid.</strong> The {props.what} matches the message, with key version {props.version}.
    </Notice>
  ) : (
    <Notice tone="warning">
      <strong>Not valid.</strong> The {props.what} does not match this message with key version{' '}
      {props.version}.
    </Notice>
  )
}

// MACs

export function MacPanel(props: { keyView: Key }) {
  const { keyView } = props
  const [data, setData] = useState('')
  const [check, setCheck] = useState({ data: '', mac: '', keyVersion: '' })
  const blocked = useBlocked(keyView, 'produce', CRYPTO_SCOPES)
  const blockedVerify = useBlocked(keyView, 'consume', CRYPTO_SCOPES)
  const macPath = `/api/v1/keys/${keyView.id}/mac`
  const body: Schemas['MacRequest'] = { data: textToBase64(data) }
  const generate = useMutation({
    mutationFn: async (request: { body: Schemas['MacRequest']; data: string }) =>
      must(
        await api.POST('/api/v1/keys/{keyId}/mac', {
          params: { path: { keyId: keyView.id } },
          body: request.body,
        }),
      ),
  })
  const version = parseVersion(check.keyVersion)
  const verifyBody: Schemas['MacVerifyRequest'] = {
    data: textToBase64(check.data),
    mac: check.mac.trim(),
    ...(version.version !== undefined ? { keyVersion: version.version } : {}),
  }
  const verify = useMutation({
    mutationFn: async (request: Schemas['MacVerifyRequest']) =>
      must(
        await api.POST('/api/v1/keys/{keyId}/mac/verify', {
          params: { path: { keyId: keyView.id } },
          body: request,
        }),
      ),
  })
  const changeCheck = (next: Partial<typeof check>) => {
    verify.reset()
    setCheck({ ...check, ...next })
  }
  return (
    <>
      <h2>Generate a MAC</h2>
      <p className="muted">{keyView.algorithm} over the UTF-8 bytes of the text (sent as Base64).</p>
      <Form label="Generate a MAC" onSubmit={() => generate.mutate({ body, data })}>
        <TextInput label="Data" multiline rows={3} value={data} onChange={setData} />
        <div className="row">
          <Button type="submit" variant="primary" disabledReason={blocked} isDisabled={generate.isPending}>
            {generate.isPending ? 'Computing…' : 'Generate MAC'}
          </Button>
        </div>
      </Form>
      <ErrorAlert error={generate.error} title="Generating the MAC failed" />
      <EquivalentRequest method="POST" path={macPath} body={body} />
      {generate.data && (
        <div className="try-result">
          <Notice tone="success">
            {generate.data.algorithm} computed with key version {generate.data.keyVersion}.
          </Notice>
          <h3>MAC (Base64)</h3>
          <pre className="try-output">
            <code data-testid="mac">{generate.data.mac}</code>
          </pre>
          <div className="row try-next">
            <CopyButton value={generate.data.mac} label="Copy the MAC" />
            <Button
              variant="secondary"
              onPress={() => {
                verify.reset()
                setCheck({
                  data: generate.variables?.data ?? '',
                  mac: generate.data.mac,
                  keyVersion: String(generate.data.keyVersion),
                })
              }}
            >
              Verify this
            </Button>
          </div>
        </div>
      )}

      <h2>Verify a MAC</h2>
      <p className="muted">Recomputed with the key version given and compared in constant time.</p>
      <Form label="Verify a MAC" onSubmit={() => version.error === undefined && verify.mutate(verifyBody)}>
        <TextInput
          label="Data to check"
          multiline
          rows={3}
          value={check.data}
          onChange={(value) => changeCheck({ data: value })}
        />
        <TextInput label="MAC (Base64)" value={check.mac} onChange={(mac) => changeCheck({ mac })} />
        <TextInput
          label="Key version (optional)"
          description="The version that computed the MAC; empty for the current version."
          value={check.keyVersion}
          error={version.error}
          onChange={(keyVersion) => changeCheck({ keyVersion })}
        />
        <div className="row">
          <Button
            type="submit"
            variant="primary"
            disabledReason={blockedVerify}
            isDisabled={verify.isPending}
          >
            {verify.isPending ? 'Verifying…' : 'Verify MAC'}
          </Button>
        </div>
      </Form>
      <ErrorAlert error={verify.error} title="Verifying the MAC failed" />
      <EquivalentRequest method="POST" path={`${macPath}/verify`} body={verifyBody} />
      {verify.data && <Validity valid={verify.data.valid} version={verify.data.keyVersion} what="MAC" />}
    </>
  )
}
