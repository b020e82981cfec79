import type { ReactNode } from 'react'
import { useId } from 'react'
import { Checkbox } from 'react-aria-components'
import { type Control, Controller, type UseFormSetValue, useWatch } from 'react-hook-form'
import type { Schemas } from '../../api/client.ts'
import { needsScope, useWorkspace } from '../../auth/workspace.tsx'
import { SelectInput } from '../../ui/Field.tsx'
import { FormTextInput } from '../../ui/FormFields.tsx'
import { ExpiryField, LabelsField } from './keys-fields.tsx'
import {
  type Algorithm,
  algorithmOptions,
  algorithmsOf,
  DEFAULT_ALGORITHM,
  type Expiry,
  expiresAtOf,
  isKeyType,
  KEY_TYPES,
  type KeyType,
} from './keys-model.ts'

export type ImportFormat = Schemas['ImportKeyRequest']['format']

/** The create and import forms (import adds its material fields; create ignores them). */
export interface KeyFormValues {
  name: string
  description: string
  keyType: KeyType
  algorithm: Algorithm
  labels: string[]
  expiry: Expiry
  exportable: boolean
  isDefault: boolean
  format: ImportFormat
  material: string
  password: string
}

export const emptyKeyForm = (keyType: KeyType = 'Encryption'): KeyFormValues => ({
  name: '',
  description: '',
  keyType,
  algorithm: DEFAULT_ALGORITHM[keyType],
  labels: [],
  expiry: { preset: 'none', date: '' },
  exportable: false,
  isDefault: false,
  format: 'PEM',
  material: '',
  password: '',
})

/** The attributes every new key is sent with (POST /keys; import adds format and material). */
export function keyBody(values: KeyFormValues): Schemas['CreateKeyRequest'] {
  const { value: expiresAt } = expiresAtOf(values.expiry)
  const description = values.description.trim()
  return {
    name: values.name.trim(),
    keyType: values.keyType,
    algorithm: values.algorithm,
    ...(description ? { description } : {}),
    ...(values.labels.length > 0 ? { labels: values.labels } : {}),
    ...(expiresAt ? { expiresAt } : {}),
    ...(values.exportable ? { exportable: true } : {}),
    ...(values.isDefault ? { isDefault: true } : {}),
  }
}

/** A checkbox with its explanation read out with it. */
export function CheckboxField(props: {
  label: string
  description: ReactNode
  isSelected: boolean
  onChange(selected: boolean): void
  isDisabled?: boolean
}) {
  const id = useId()
  return (
    <div className="keys-checkbox-field">
      <Checkbox
        className="checkbox"
        isSelected={props.isSelected}
        onChange={props.onChange}
        isDisabled={props.isDisabled}
        aria-describedby={id}
      >
        <span className="checkbox-box" aria-hidden="true" />
        {props.label}
      </Checkbox>
      <p id={id} className="muted keys-checkbox-description">
        {props.description}
      </p>
    </div>
  )
}

/**
 * Name, description, type, algorithm (every one the API accepts for the type), labels, expiry,
 * exportable and default: the fields create and import share.
 */
export function KeyAttributeFields(props: {
  control: Control<KeyFormValues>
  setValue: UseFormSetValue<KeyFormValues>
  /** Import: the algorithm must be the material's. */
  algorithmDescription?: string
  /** Sections between the key's basics and its labels (import: the material). */
  afterBasics?: ReactNode
}) {
  const { can } = useWorkspace()
  const { control } = props
  const keyType = useWatch({ control, name: 'keyType' })
  return (
    <>
      <section className="section keys-section stack" aria-labelledby="keys-form-basics">
        <h2 id="keys-form-basics">Key</h2>
        <FormTextInput
          control={control}
          name="name"
          rules={{
            validate: (name) => {
              const trimmed = name.trim()
              if (!trimmed) return 'Give the key a name'
              if (trimmed.length > 200) return 'A name has at most 200 characters'
              return true
            },
          }}
          label="Name"
          isRequired
          maxLength={200}
          description="Unique within the tenant, e.g. orders-encryption."
        />
        <FormTextInput
          control={control}
          name="description"
          label="Description"
          multiline
          rows={2}
          maxLength={1000}
          description="Optional: what the key protects, who uses it."
        />
        <div className="row">
          <Controller
            control={control}
            name="keyType"
            render={({ field }) => (
              <SelectInput
                label="Type"
                value={field.value}
                options={KEY_TYPES}
                isRequired
                onChange={(value) => {
                  if (!isKeyType(value)) return
                  field.onChange(value)
                  props.setValue('algorithm', DEFAULT_ALGORITHM[value])
                }}
                description="What the key is for; fixed once created."
              />
            )}
          />
          <Controller
            control={control}
            name="algorithm"
            rules={{
              validate: (algorithm) =>
                algorithmsOf(keyType).includes(algorithm) || `${algorithm} is not a ${keyType} algorithm`,
            }}
            render={({ field, fieldState }) => (
              <SelectInput
                label="Algorithm"
                value={field.value}
                options={algorithmOptions(keyType)}
                isRequired
                error={fieldState.error?.message}
                onChange={(value) => field.onChange(value as Algorithm)}
                description={
                  props.algorithmDescription ??
                  `${algorithmsOf(keyType).length} algorithms serve ${keyType} keys; post-quantum ones resist quantum attacks.`
                }
              />
            )}
          />
        </div>
      </section>
      {props.afterBasics}
      <section className="section keys-section stack" aria-labelledby="keys-form-labels">
        <h2 id="keys-form-labels">Labels and expiry</h2>
        <Controller
          control={control}
          name="labels"
          render={({ field }) => (
            <LabelsField
              label="Labels"
              description="Tags to find and group keys, e.g. prod or orders. Press Enter to add each."
              value={field.value}
              onChange={field.onChange}
            />
          )}
        />
        <Controller
          control={control}
          name="expiry"
          rules={{ validate: (expiry) => expiresAtOf(expiry).problem ?? true }}
          render={({ field, fieldState }) => (
            <ExpiryField value={field.value} onChange={field.onChange} error={fieldState.error?.message} />
          )}
        />
      </section>
      <section className="section keys-section stack" aria-labelledby="keys-form-options">
        <h2 id="keys-form-options">Options</h2>
        <Controller
          control={control}
          name="exportable"
          render={({ field }) => (
            <CheckboxField
              label="Allow private key export"
              isSelected={field.value}
              onChange={field.onChange}
              description="Lets members with the keys:export scope download the private key. This cannot be changed after the key is made; leave it off unless the key must leave the service."
            />
          )}
        />
        <Controller
          control={control}
          name="isDefault"
          render={({ field }) => (
            <CheckboxField
              label={`Make this the default ${keyType} key`}
              isSelected={field.value}
              onChange={field.onChange}
              isDisabled={!can('encryption:write')}
              description={
                can('encryption:write')
                  ? 'Requests that name no key use the default key of their type; this replaces the current default.'
                  : `${needsScope('encryption:write')}: only members who may encrypt choose the default key.`
              }
            />
          )}
        />
      </section>
    </>
  )
}
