import type { ReactNode } from 'react'
import {
  Button as AriaButton,
  Checkbox,
  FieldError,
  Input,
  Label,
  ListBox,
  ListBoxItem,
  Popover,
  Select,
  SelectValue,
  Text,
  TextArea,
  TextField,
} from 'react-aria-components'

interface FieldProps {
  label: string
  description?: ReactNode
  /** The error to show under the field (the API's or the form's). */
  error?: string | undefined
  isRequired?: boolean
  isDisabled?: boolean
  name?: string
}

export type TextInputProps = FieldProps & {
  value: string
  onChange(value: string): void
  onBlur?(): void
  type?: 'text' | 'password' | 'email' | 'search' | 'date' | 'datetime-local' | 'number'
  placeholder?: string
  autoComplete?: string
  maxLength?: number
  multiline?: boolean
  rows?: number
  className?: string
}

export function TextInput(props: TextInputProps) {
  return (
    <TextField
      className={`field${props.className ? ` ${props.className}` : ''}`}
      value={props.value}
      onChange={props.onChange}
      onBlur={props.onBlur}
      isRequired={props.isRequired}
      isDisabled={props.isDisabled}
      isInvalid={props.error !== undefined}
      name={props.name}
      type={props.multiline ? undefined : (props.type ?? 'text')}
      maxLength={props.maxLength}
      autoComplete={props.autoComplete}
    >
      <Label>{props.label}</Label>
      {props.multiline ? (
        <TextArea rows={props.rows ?? 4} placeholder={props.placeholder} />
      ) : (
        <Input placeholder={props.placeholder} />
      )}
      {props.description && <Text slot="description">{props.description}</Text>}
      <FieldError>{props.error}</FieldError>
    </TextField>
  )
}

export interface Option {
  id: string
  label: string
  description?: string
}

export type SelectInputProps = FieldProps & {
  options: readonly Option[]
  value: string | null
  onChange(value: string): void
  placeholder?: string
}

export function SelectInput(props: SelectInputProps) {
  return (
    <Select
      className="field"
      selectedKey={props.value}
      onSelectionChange={(key) => key !== null && props.onChange(String(key))}
      isRequired={props.isRequired}
      isDisabled={props.isDisabled}
      isInvalid={props.error !== undefined}
      name={props.name}
      placeholder={props.placeholder ?? 'Choose…'}
    >
      <Label>{props.label}</Label>
      <AriaButton className="select-button">
        <SelectValue>{({ selectedText, defaultChildren }) => selectedText ?? defaultChildren}</SelectValue>
        <span aria-hidden="true" className="select-arrow">
          ▾
        </span>
      </AriaButton>
      {props.description && <Text slot="description">{props.description}</Text>}
      <FieldError>{props.error}</FieldError>
      <Popover className="popover">
        <ListBox className="listbox" items={props.options}>
          {(option) => (
            <ListBoxItem className="listbox-item" id={option.id} textValue={option.label}>
              <span>{option.label}</span>
              {option.description && <span className="option-description">{option.description}</span>}
            </ListBoxItem>
          )}
        </ListBox>
      </Popover>
    </Select>
  )
}

export function CheckboxInput(props: {
  label: ReactNode
  isSelected: boolean
  onChange(selected: boolean): void
  isDisabled?: boolean
  name?: string
  value?: string
}) {
  return (
    <Checkbox
      className="checkbox"
      isSelected={props.isSelected}
      onChange={props.onChange}
      isDisabled={props.isDisabled}
      name={props.name}
      value={props.value}
    >
      <span className="checkbox-box" aria-hidden="true" />
      {props.label}
    </Checkbox>
  )
}
