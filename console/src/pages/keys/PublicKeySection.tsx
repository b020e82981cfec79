import { useMutation, useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { api, must } from '../../api/client.ts'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { CopyButton } from '../../ui/CopyButton.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { SelectInput } from '../../ui/Field.tsx'
import {
  downloadPublicKey,
  type Key,
  PUBLIC_FORMATS,
  type PublicFormat,
  publicDownloadPath,
} from './keys-model.ts'

/** The public key as text (the JWK as formatted JSON). */
async function publicKeyText(key: Key, format: PublicFormat, version: number): Promise<string> {
  const body = must(
    await api.GET('/api/v1/keys/{keyId}/public', {
      params: { path: { keyId: key.id }, query: { format, version } },
    }),
  )
  return 'publicKey' in body && typeof body.publicKey === 'string' && format !== 'JWK'
    ? body.publicKey
    : JSON.stringify(body, null, 2)
}

/** GET /keys/{id}/public/download in each format of spec 2.2, for any version. */
export function PublicKeySection(props: { keyRecord: Key; versions: number[] }) {
  const { keyRecord: key } = props
  const [format, setFormat] = useState<PublicFormat>('PEM')
  const [version, setVersion] = useState(key.version)
  const [shown, setShown] = useState(false)
  const [saved, setSaved] = useState<string | undefined>()
  const download = useMutation({
    mutationFn: () => downloadPublicKey(key, format, version),
    onSuccess: (name) => setSaved(`Downloaded ${name}.`),
  })
  const text = useQuery({
    queryKey: ['keys', 'public', key.id, version, format],
    queryFn: () => publicKeyText(key, format, version),
    enabled: shown,
  })
  if (key.keyType === 'HMAC')
    return (
      <section className="section keys-section" aria-labelledby="keys-public">
        <h2 id="keys-public">Public key</h2>
        <p className="muted">An HMAC key is a shared secret: it has no public key.</p>
      </section>
    )
  const blocked = key.state === 'Destroyed' ? 'A destroyed key has no public key any more' : undefined
  const versions = props.versions.length > 0 ? props.versions : [key.version]
  return (
    <section className="section keys-section" aria-labelledby="keys-public">
      <h2 id="keys-public">Public key</h2>
      <p className="muted">
        Share it with whoever encrypts to this key or verifies its signatures; it reveals nothing secret.
      </p>
      <div className="row">
        <SelectInput
          label="Format"
          value={format}
          options={PUBLIC_FORMATS}
          onChange={(value) => {
            setFormat(value as PublicFormat)
            setSaved(undefined)
          }}
        />
        <SelectInput
          label="Version"
          value={String(version)}
          options={[...versions]
            .sort((a, b) => b - a)
            .map((number) => ({
              id: String(number),
              label: `v${number}${number === key.version ? ' (current)' : ''}`,
            }))}
          onChange={(value) => setVersion(Number(value))}
        />
        <Button
          variant="primary"
          isDisabled={download.isPending}
          disabledReason={blocked}
          onPress={() => download.mutate()}
        >
          Download public key
        </Button>
        <Button isDisabled={blocked !== undefined} onPress={() => setShown(!shown)} aria-expanded={shown}>
          {shown ? 'Hide public key' : 'Show public key'}
        </Button>
        {!blocked && <CopyButton label="Copy public key" value={() => publicKeyText(key, format, version)} />}
      </div>
      {saved && <Notice tone="success">{saved}</Notice>}
      <ErrorAlert error={download.error} title="The public key was not downloaded" />
      <ErrorAlert error={text.error} />
      {shown && text.data && (
        <figure className="keys-figure">
          <figcaption className="muted">
            Public key, {format}, version {version}
          </figcaption>
          <pre className="keys-public-text">
            <code>{text.data}</code>
          </pre>
        </figure>
      )}
      <EquivalentRequest method="GET" path={publicDownloadPath(key.id, format, version)} />
    </section>
  )
}
