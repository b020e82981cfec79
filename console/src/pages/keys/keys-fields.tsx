import { useState } from 'react'
import {
  Button as AriaButton,
  Input,
  Label,
  Radio,
  RadioGroup,
  Tag,
  TagGroup,
  TagList,
  Text,
  TextField,
} from 'react-aria-components'
import { Button } from '../../ui/Button.tsx'
import { TextInput } from '../../ui/Field.tsx'
import {
  DAY_MS,
  daysUntil,
  EXPIRY_PRESETS,
  type Expiry,
  type ExpiryPreset,
  expiresAtOf,
  formatDate,
  type Key,
  type KeyState,
  labelProblem,
} from './keys-model.ts'

const STATE_BADGE: Record<KeyState, string> = {
  Active: 'badge badge-success',
  Expired: 'badge badge-warning',
  Revoked: 'badge badge-danger',
  'Pending Deletion': 'badge badge-warning',
  Destroyed: 'badge',
}

export function StateBadge(props: { state: KeyState }) {
  return <span className={STATE_BADGE[props.state]}>{props.state}</span>
}

/** When an Active key expires, marked when it is within the 30-day alert window. */
export function ExpiryText(props: { keyRecord: Key }) {
  const { expiresAt, state } = props.keyRecord
  if (!expiresAt) return <span className="muted">Never</span>
  const days = daysUntil(expiresAt)
  if (state === 'Active' && days <= 30)
    return (
      <span>
        {formatDate(expiresAt)}{' '}
        <span className="badge badge-warning">{days <= 1 ? 'within a day' : `in ${days} days`}</span>
      </span>
    )
  return <span>{formatDate(expiresAt)}</span>
}

/** Labels as removable tags. */
export function LabelTags(props: {
  labels: readonly string[]
  label: string
  onRemove?(labels: string[]): void
}) {
  if (props.labels.length === 0) return null
  return (
    <TagGroup
      aria-label={props.label}
      className="keys-tags"
      onRemove={props.onRemove ? (keys) => props.onRemove?.([...keys].map(String)) : undefined}
    >
      <TagList className="keys-tag-list" items={props.labels.map((label) => ({ id: label }))}>
        {(item) => (
          <Tag className="keys-tag" id={item.id} textValue={item.id}>
            {item.id}
            {props.onRemove && (
              <AriaButton slot="remove" className="keys-tag-remove" aria-label={`Remove ${item.id}`}>
                ×
              </AriaButton>
            )}
          </Tag>
        )}
      </TagList>
    </TagGroup>
  )
}

/**
 * A set of labels: type one and press Enter (or Add); each shows as a tag that can be removed
 * (Delete or its × button).
 */
export function LabelsField(props: {
  label: string
  description?: string
  value: readonly string[]
  onChange(labels: string[]): void
  isDisabled?: boolean
  addLabel?: string
}) {
  const [draft, setDraft] = useState('')
  const [problem, setProblem] = useState<string | undefined>()
  const add = () => {
    const label = draft.trim()
    const issue = labelProblem(label, props.value)
    setProblem(issue)
    if (issue) return
    props.onChange([...props.value, label])
    setDraft('')
  }
  return (
    <div className="keys-labels-field">
      <div className="row">
        <TextField
          className="field"
          value={draft}
          onChange={(value) => {
            setDraft(value)
            setProblem(undefined)
          }}
          isDisabled={props.isDisabled}
          isInvalid={problem !== undefined}
          maxLength={64}
        >
          <Label>{props.label}</Label>
          <Input
            onKeyDown={(event) => {
              if (event.key === 'Enter') {
                event.preventDefault()
                add()
              }
            }}
          />
          {props.description && <Text slot="description">{props.description}</Text>}
          {problem && (
            <Text slot="errorMessage" className="keys-field-error">
              {problem}
            </Text>
          )}
        </TextField>
        <Button onPress={add} isDisabled={props.isDisabled}>
          {props.addLabel ?? 'Add label'}
        </Button>
      </div>
      <LabelTags
        label={`${props.label}: chosen`}
        labels={props.value}
        onRemove={
          props.isDisabled
            ? undefined
            : (removed) => props.onChange(props.value.filter((label) => !removed.includes(label)))
        }
      />
    </div>
  )
}

/** A group of choices shown at once (radio buttons). */
export function RadioChoice<T extends string>(props: {
  label: string
  description?: string
  value: T
  options: ReadonlyArray<{ id: T; label: string; description?: string }>
  onChange(value: T): void
  isDisabled?: boolean
  orientation?: 'horizontal' | 'vertical'
}) {
  return (
    <RadioGroup
      className="field keys-radio-group"
      value={props.value}
      onChange={(value) => props.onChange(value as T)}
      isDisabled={props.isDisabled}
      orientation={props.orientation ?? 'horizontal'}
    >
      <Label>{props.label}</Label>
      <div className={`keys-radios keys-radios-${props.orientation ?? 'horizontal'}`}>
        {props.options.map((option) => (
          <Radio key={option.id} value={option.id} className="keys-radio">
            <span className="keys-radio-mark" aria-hidden="true" />
            <span>
              {option.label}
              {option.description && <span className="option-description"> {option.description}</span>}
            </span>
          </Radio>
        ))}
      </div>
      {props.description && <Text slot="description">{props.description}</Text>}
    </RadioGroup>
  )
}

const isoDay = (time: number) => new Date(time).toISOString().slice(0, 10)

/** The expiry presets of spec 2.2, with the date each one means. */
export function ExpiryField(props: {
  value: Expiry
  onChange(value: Expiry): void
  error?: string | undefined
  isDisabled?: boolean
}) {
  const { value } = props
  const { value: expiresAt } = expiresAtOf(value)
  return (
    <div className="stack keys-expiry">
      <RadioChoice<ExpiryPreset>
        label="Expiry"
        value={value.preset}
        options={EXPIRY_PRESETS}
        isDisabled={props.isDisabled}
        onChange={(preset) =>
          props.onChange({
            preset,
            date: preset === 'custom' && !value.date ? isoDay(Date.now() + 180 * DAY_MS) : value.date,
          })
        }
      />
      {value.preset === 'custom' && (
        <TextInput
          label="Expiry date"
          type="date"
          value={value.date}
          onChange={(date) => props.onChange({ ...value, date })}
          error={props.error}
          isDisabled={props.isDisabled}
          description="The key expires at the end of this day, in your time zone."
          className="keys-date"
        />
      )}
      <p className="muted keys-expiry-summary">
        {value.preset === 'none'
          ? 'The key does not expire. Once it expires, a key can no longer encrypt or sign; it still decrypts and verifies.'
          : expiresAt
            ? `Expires on ${formatDate(expiresAt)}. After that the key can no longer encrypt or sign; it still decrypts and verifies.`
            : ''}
      </p>
    </div>
  )
}
