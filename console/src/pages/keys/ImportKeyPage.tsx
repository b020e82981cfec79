import { useMutation, useQueryClient } from '@tanstack/react-query'
import { Link, useNavigate } from '@tanstack/react-router'
import { useState } from 'react'
import { FileTrigger } from 'react-aria-components'
import { Controller, useForm, useWatch } from 'react-hook-form'
import { ApiError, api, must, type Schemas } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import { ErrorAlert, Notice } from '../../ui/Alert.tsx'
import { Button } from '../../ui/Button.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { FormTextInput } from '../../ui/FormFields.tsx'
import { PageHeader } from '../../ui/Page.tsx'
import {
  emptyKeyForm,
  type ImportFormat,
  KeyAttributeFields,
  type KeyFormValues,
  keyBody,
} from './key-form.tsx'
import { RadioChoice } from './keys-fields.tsx'
import { base64Of, setFlash } from './keys-model.ts'

/** The import formats of POST /keys/import (docs/keys.md "Import (BYOK)"). */
const FORMATS: ReadonlyArray<{ id: ImportFormat; label: string; description: string; placeholder: string }> =
  [
    {
      id: 'PEM',
      label: 'PEM',
      description:
        'PKCS#8 (PRIVATE KEY or ENCRYPTED PRIVATE KEY), PKCS#1 RSA PRIVATE KEY or SEC1 EC PRIVATE KEY text',
      placeholder: '-----BEGIN PRIVATE KEY-----\n…\n-----END PRIVATE KEY-----',
    },
    {
      id: 'PKCS#8',
      label: 'PKCS#8',
      description: 'PKCS#8 as PEM text or Base64 of its DER; may be encrypted with a password',
      placeholder: '-----BEGIN ENCRYPTED PRIVATE KEY-----\n…',
    },
    {
      id: 'JWK',
      label: 'JWK',
      description: 'A private JSON Web Key (with d or priv; kty "oct" with k for HMAC)',
      placeholder: '{"kty": "OKP", "crv": "Ed25519", "d": "…", "x": "…"}',
    },
    {
      id: 'DER',
      label: 'DER (Base64)',
      description: 'Base64 of a DER PKCS#8 (optionally encrypted), PKCS#1 or SEC1 key',
      placeholder: 'MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg…',
    },
    {
      id: 'RAW',
      label: 'RAW (Base64)',
      description:
        'Base64 of the raw bytes: HMAC secret, ML-KEM seed (64 B), ML-DSA seed (32 B), SLH-DSA (64 B) or Ed25519 (32 B) private key, EC scalar',
      placeholder: 'q83vEjRWeJASNFZ4kBI0VniQEjRWeJASNFZ4kBI0Vng=',
    },
  ]

const takesPassword = (format: ImportFormat) => format === 'PEM' || format === 'PKCS#8' || format === 'DER'
const isBase64 = (text: string) => /^[A-Za-z0-9+/\s]+={0,2}\s*$/.test(text)

function parseMaterial(values: KeyFormValues): {
  value?: Schemas['ImportKeyRequest']['keyMaterial']
  problem?: string
} {
  const text = values.material.trim()
  if (!text) return { problem: 'Paste the key material or load it from a file' }
  if (values.format === 'JWK') {
    try {
      const jwk = JSON.parse(text) as unknown
      if (
        typeof jwk !== 'object' ||
        jwk === null ||
        Array.isArray(jwk) ||
        typeof (jwk as { kty?: unknown }).kty !== 'string'
      )
        return { problem: 'A JWK is a JSON object with a kty member' }
      return { value: jwk as Schemas['ImportKeyRequest']['keyMaterial'] }
    } catch {
      return { problem: 'This is not valid JSON' }
    }
  }
  if ((values.format === 'DER' || values.format === 'RAW') && !isBase64(text))
    return { problem: 'Base64 text is expected (A–Z, a–z, 0–9, + and /)' }
  return { value: text }
}

function importBody(values: KeyFormValues): Schemas['ImportKeyRequest'] {
  return {
    ...keyBody(values),
    format: values.format,
    keyMaterial: parseMaterial(values).value ?? '',
    ...(takesPassword(values.format) && values.password ? { password: values.password } : {}),
  }
}

/** /keys/import: bring your own key (POST /api/v1/keys/import), then open it. */
export function ImportKeyPage() {
  const { can } = useWorkspace()
  const navigate = useNavigate()
  const queryClient = useQueryClient()
  const [loaded, setLoaded] = useState<string | undefined>()
  const { control, handleSubmit, setValue, setError } = useForm<KeyFormValues>({
    defaultValues: { ...emptyKeyForm('Signing'), format: 'PEM' },
  })
  const values = useWatch({ control }) as KeyFormValues
  const format = FORMATS.find((item) => item.id === values.format) ?? FORMATS[0]!
  // gcTime 0: the material (the mutation's variables) is not kept once the page is left.
  const importKey = useMutation({
    gcTime: 0,
    mutationFn: async (body: Schemas['ImportKeyRequest']) =>
      must(await api.POST('/api/v1/keys/import', { body })),
    onSuccess: async (key) => {
      queryClient.setQueryData(['keys', 'detail', key.id], key)
      await queryClient.invalidateQueries({ queryKey: ['keys', 'list'] })
      setFlash(key.id, `Key ${key.name} imported (${key.algorithm}). Its material is sealed by the service.`)
      await navigate({ to: '/keys/$keyId', params: { keyId: key.id } })
    },
    onError: (error) => {
      if (!(error instanceof ApiError)) return
      if (error.code === 'key_name_taken') setError('name', { message: error.message })
      if (error.code === 'password_required' || error.code === 'incorrect_password')
        setError('password', { message: error.message })
    },
  })

  const loadFile = async (files: FileList | null) => {
    const file = files?.[0]
    if (!file) return
    const bytes = new Uint8Array(await file.arrayBuffer())
    // PEM and JWK are text; DER and RAW files are binary, sent as Base64.
    const text =
      values.format === 'DER' || values.format === 'RAW' ? base64Of(bytes) : new TextDecoder().decode(bytes)
    setValue('material', text, { shouldValidate: true })
    setLoaded(`${file.name} (${bytes.length.toLocaleString()} bytes) loaded.`)
  }

  const shownBody = {
    ...importBody(values),
    keyMaterial: '<key material>',
    ...(takesPassword(values.format) && values.password ? { password: '<password>' } : {}),
  }
  const denied = can('keys:write') ? undefined : needsScope('keys:write')
  const materialSection = (
    <section className="section keys-section stack" aria-labelledby="keys-import-material">
      <h2 id="keys-import-material">Key material</h2>
      <Controller
        control={control}
        name="format"
        render={({ field }) => (
          <RadioChoice<ImportFormat>
            label="Format"
            value={field.value}
            options={FORMATS.map(({ id, label }) => ({ id, label }))}
            onChange={field.onChange}
            description={format.description}
          />
        )}
      />
      <FormTextInput
        control={control}
        name="material"
        rules={{ validate: (_, form) => parseMaterial(form).problem ?? true }}
        label="Private key"
        multiline
        rows={8}
        isRequired
        placeholder={format.placeholder}
        autoComplete="off"
        className="keys-material"
        description="Paste it here or load it from a file. It is sent only to this service, over this connection."
      />
      <div className="row">
        <FileTrigger
          onSelect={(files) => void loadFile(files)}
          acceptedFileTypes={['.pem', '.key', '.der', '.p8', '.pk8', '.json', '.jwk', '.txt', '.bin']}
        >
          <Button>Load from a file…</Button>
        </FileTrigger>
        {loaded && <span className="muted">{loaded}</span>}
      </div>
      {takesPassword(values.format) && (
        <FormTextInput
          control={control}
          name="password"
          label="Password"
          type="password"
          autoComplete="off"
          description="Only for an encrypted PKCS#8 key (ENCRYPTED PRIVATE KEY); leave empty otherwise."
        />
      )}
    </section>
  )
  return (
    <div className="keys-page">
      <PageHeader
        title="Import a key"
        description="Bring your own key: the material is checked, sealed by the tenant's key before the answer, and never stored in clear."
        actions={<Link to="/keys">Back to keys</Link>}
      />
      <form
        noValidate
        onSubmit={handleSubmit((form) => importKey.mutate(importBody(form)))}
        className="keys-form"
      >
        <KeyAttributeFields
          control={control}
          setValue={setValue}
          algorithmDescription="Must be the material's algorithm and size exactly, or the import is refused."
          afterBasics={materialSection}
        />
        <ErrorAlert error={importKey.error} title="The key was not imported" />
        {importKey.isPending && <Notice>Checking and sealing the key…</Notice>}
        <div className="row keys-form-actions">
          <Button type="submit" variant="primary" isDisabled={importKey.isPending} disabledReason={denied}>
            {importKey.isPending ? 'Importing…' : 'Import key'}
          </Button>
          <Link to="/keys">Cancel</Link>
        </div>
      </form>
      <EquivalentRequest method="POST" path="/api/v1/keys/import" body={shownBody} />
      <p className="muted keys-note">
        The equivalent request leaves the key material and password out: put yours in before running it.
      </p>
    </div>
  )
}
