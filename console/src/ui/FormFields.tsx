import { type Control, Controller, type FieldValues, type Path, type RegisterOptions } from 'react-hook-form'
import { SelectInput, type SelectInputProps, TextInput, type TextInputProps } from './Field.tsx'

type Rules<Values extends FieldValues, Name extends Path<Values>> = Omit<
  RegisterOptions<Values, Name>,
  'valueAsNumber' | 'valueAsDate' | 'setValueAs' | 'disabled'
>

/**
 * A TextInput bound to a react-hook-form field: its value, changes, blur and the field's error
 * (from `rules` or `setError`, e.g. the API's answer) come from the form.
 */
export function FormTextInput<Values extends FieldValues, Name extends Path<Values>>(
  props: Omit<TextInputProps, 'value' | 'onChange' | 'onBlur' | 'error'> & {
    control: Control<Values>
    name: Name
    rules?: NoInfer<Rules<Values, Name>>
  },
) {
  const { control, name, rules, ...input } = props
  return (
    <Controller
      control={control}
      name={name}
      rules={rules}
      render={({ field, fieldState }) => (
        <TextInput
          {...input}
          value={field.value}
          onChange={field.onChange}
          onBlur={field.onBlur}
          error={fieldState.error?.message}
        />
      )}
    />
  )
}

/** A SelectInput bound to a react-hook-form field (its value is the chosen option's id). */
export function FormSelectInput<Values extends FieldValues, Name extends Path<Values>>(
  props: Omit<SelectInputProps, 'value' | 'onChange' | 'error'> & {
    control: Control<Values>
    name: Name
    rules?: NoInfer<Rules<Values, Name>>
  },
) {
  const { control, name, rules, ...input } = props
  return (
    <Controller
      control={control}
      name={name}
      rules={rules}
      render={({ field, fieldState }) => (
        <SelectInput
          {...input}
          value={field.value}
          onChange={field.onChange}
          error={fieldState.error?.message}
        />
      )}
    />
  )
}
