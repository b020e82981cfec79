import { useMutation } from '@tanstack/react-query'
import { useState } from 'react'
import { api, must, type Schemas } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { CopyButton } from '../../ui/CopyButton.tsx'
import { DialogButton } from '../../ui/Dialog.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { SelectInput, TextInput } from '../../ui/Field.tsx'
import { bytesOfBase64, type Key, saveBlob } from './keys-model.ts'

type PrivateFormat = Schemas['ExportPrivateKeyRequest']['format']
type Exported = Schemas['PrivateKeyExport']

const FORMATS: ReadonlyArray<{ id: PrivateFormat; label: string; description: string; extension: string }> = [
  { id: 'PEM', label: 'PEM (PKCS#8)', description: 'Text with header and footer', extension: 'pem' },
  { id: 'DER', label: 'DER (PKCS#8)', description: 'Binary ASN.1', extension: 'der' },
  { id: 'JWK', label: 'JWK', description: 'A private JSON Web Key', extension: 'json' },
  {
    id: 'RAW',
    label: 'RAW',
    description: 'The raw secret, seed or scalar as Base64 (not RSA)',
    extension: 'txt',
  },
]
const encrypts = (format: PrivateFormat) => format === 'PEM' || format === 'DER'

/** The private key as text (PEM, Base64 of DER or RAW, the JWK as JSON). */
const textOf = (exported: Exported): string =>
  typeof exported.privateKey === 'string' ? exported.privateKey : JSON.stringify(exported.privateKey, null, 2)

function saveExport(key: Key, exported: Exported): string {
  const format = FORMATS.find((item) => item.id === exported.format) ?? FORMATS[0]!
  const base = key.name.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^[._]+/, '') || key.id
  const name = `${base}-v${exported.version}-private.${format.extension}`
  const text = textOf(exported)
  const blob =
    exported.format === 'DER'
      ? new Blob([bytesOfBase64(text)], { type: 'application/pkcs8' })
      : new Blob([`${text}\n`], { type: exported.format === 'JWK' ? 'application/jwk+json' : 'text/plain' })
  saveBlob(blob, name)
  return name
}

/** Why this person cannot export this key's private key (undefined: they can). */
function exportBlock(key: Key, can: (scope: string) => boolean): string | undefined {
  if (!can('keys:export')) return needsScope('keys:export')
  if (!key.exportable)
    return 'This key was made without “Allow private key export”, which cannot be turned on later'
  if (key.state !== 'Active' && key.state !== 'Expired')
    return `Only Active and Expired keys can be exported (this one is ${key.state})`
  return undefined
}

function ExportDialog(props: { keyRecord: Key; versions: number[]; close(): void }) {
  const { keyRecord: key } = props
  // HMAC secrets have no PKCS#8 form; RSA keys have no RAW one.
  const formats = FORMATS.filter((item) =>
    key.keyType === 'HMAC'
      ? item.id === 'RAW' || item.id === 'JWK'
      : item.id !== 'RAW' || !key.algorithm.startsWith('RSA-'),
  )
  const [format, setFormat] = useState<PrivateFormat>(formats[0]!.id)
  const [password, setPassword] = useState('')
  const [confirm, setConfirm] = useState('')
  const [version, setVersion] = useState(key.version)
  const [revealed, setRevealed] = useState(false)
  const [saved, setSaved] = useState<string | undefined>()
  const body: Schemas['ExportPrivateKeyRequest'] = {
    confirm,
    format,
    ...(encrypts(format) && password ? { password } : {}),
    ...(version !== key.version ? { version } : {}),
  }
  // gcTime 0: the private key leaves memory with the dialog (no cached mutation keeps it).
  const run = useMutation({
    gcTime: 0,
    mutationFn: async () =>
      must(
        await api.POST('/api/v1/keys/{keyId}/export-private', { params: { path: { keyId: key.id } }, body }),
      ),
  })
  const passwordProblem =
    encrypts(format) && password.length > 0 && password.length < 12
      ? 'A password has at least 12 characters'
      : undefined
  const blocked = confirm !== key.name ? 'Type the key’s name exactly to enable the export' : passwordProblem
  const exported = run.data
  if (exported)
    return (
      <div className="stack">
        <Notice tone="warning">
          The private key of version {exported.version} is exported as {exported.format}
          {exported.encrypted ? ', encrypted with your password' : ', unencrypted'}. It stays hidden here:
          download or copy it and keep it somewhere safe. The export is recorded in the audit log.
        </Notice>
        <div className="row">
          <Button variant="primary" onPress={() => setSaved(`Saved ${saveExport(key, exported)}.`)}>
            Download file
          </Button>
          <CopyButton label="Copy private key" value={textOf(exported)} />
          <Button onPress={() => setRevealed(!revealed)} aria-expanded={revealed}>
            {revealed ? 'Hide private key' : 'Show private key'}
          </Button>
        </div>
        {saved && <Notice tone="success">{saved}</Notice>}
        {revealed && (
          <pre className="keys-secret">
            <code>{textOf(exported)}</code>
          </pre>
        )}
        <div className="row keys-dialog-actions">
          <Button onPress={props.close}>Done</Button>
        </div>
      </div>
    )
  return (
    <form
      noValidate
      className="stack"
      onSubmit={(event) => {
        event.preventDefault()
        if (!blocked) run.mutate()
      }}
    >
      <p>
        Whoever holds the private key can decrypt and sign as <strong>{key.name}</strong> without this
        service. Export it only to move it somewhere as well protected.
      </p>
      <div className="row">
        <SelectInput
          label="Format"
          value={format}
          options={formats}
          onChange={(value) => setFormat(value as PrivateFormat)}
        />
        {props.versions.length > 1 && (
          <SelectInput
            label="Version"
            value={String(version)}
            options={[...props.versions]
              .sort((a, b) => b - a)
              .map((number) => ({
                id: String(number),
                label: `v${number}${number === key.version ? ' (current)' : ''}`,
              }))}
            onChange={(value) => setVersion(Number(value))}
          />
        )}
      </div>
      {encrypts(format) && (
        <TextInput
          label="Password (recommended)"
          type="password"
          value={password}
          onChange={setPassword}
          autoComplete="new-password"
          error={passwordProblem}
          description="At least 12 characters: encrypts the PKCS#8 file (PBES2, PBKDF2-HMAC-SHA256, AES-256-CBC). Leave empty for an unencrypted file."
        />
      )}
      <TextInput
        label="Type the key's name to confirm"
        value={confirm}
        onChange={setConfirm}
        autoComplete="off"
        description={
          <>
            Type <strong className="mono">{key.name}</strong> exactly.
          </>
        }
      />
      <ErrorAlert error={run.error} title="The private key was not exported" />
      <div className="row keys-dialog-actions">
        <Button onPress={props.close}>Cancel</Button>
        <Button type="submit" variant="danger" isDisabled={run.isPending} disabledReason={blocked}>
          {run.isPending ? 'Exporting…' : 'Export private key'}
        </Button>
      </div>
      <EquivalentRequest
        method="POST"
        path={`/api/v1/keys/${key.id}/export-private`}
        body={{ ...body, confirm: key.name, ...(body.password ? { password: '<password>' } : {}) }}
      />
    </form>
  )
}

/** POST /keys/{id}/export-private: keys:export, an exportable key, and its name typed to confirm. */
export function ExportPrivateSection(props: { keyRecord: Key; versions: number[] }) {
  const { keyRecord: key } = props
  const { can } = useWorkspace()
  const blocked = exportBlock(key, can)
  return (
    <section className="section keys-section" aria-labelledby="keys-export">
      <h2 id="keys-export">Private key export</h2>
      <p className="muted">
        {key.exportable
          ? 'This key was made exportable: members with the keys:export scope can take its private key out.'
          : 'This key is not exportable: its private key never leaves the service.'}
      </p>
      <DialogButton
        label="Export private key…"
        title={`Export the private key of ${key.name}`}
        variant="danger"
        disabledReason={blocked}
        isDismissable={false}
      >
        {(close) => <ExportDialog keyRecord={key} versions={props.versions} close={close} />}
      </DialogButton>
    </section>
  )
}
