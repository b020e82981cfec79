import { type FormEvent, useState } from 'react'
import { defined } from '../../search.ts'
import { Button } from '../../ui/Button.tsx'
import { EquivalentRequest } from '../../ui/EquivalentRequest.tsx'
import { SelectInput, TextInput } from '../../ui/Field.tsx'
import {
  type AuditFilters,
  apiQuery,
  fromLocalInput,
  hasFilters,
  OUTCOMES,
  PAGE_SIZE,
  toLocalInput,
} from './audit-data.ts'

const OUTCOME_OPTIONS = [
  { id: 'any', label: 'Any outcome' },
  { id: 'success', label: 'Success', description: 'The operation was done' },
  { id: 'failure', label: 'Failure', description: 'It was attempted and failed' },
  { id: 'denied', label: 'Denied', description: 'The caller was not allowed' },
]

const TIME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone

interface Draft {
  action: string
  actor: string
  resource: string
  outcome: string
  from: string
  to: string
}

const draftOf = (filters: AuditFilters): Draft => ({
  action: filters.action ?? '',
  actor: filters.actor ?? '',
  resource: filters.resource ?? '',
  outcome: filters.outcome ?? 'any',
  from: toLocalInput(filters.from),
  to: toLocalInput(filters.to),
})

/** The filters of a draft, or the errors that keep it from being applied. */
function check(draft: Draft): { filters: AuditFilters; errors: Partial<Record<'from' | 'to', string>> } {
  const from = draft.from ? fromLocalInput(draft.from) : undefined
  const to = draft.to ? fromLocalInput(draft.to) : undefined
  const errors: Partial<Record<'from' | 'to', string>> = {}
  if (from === null) errors.from = 'Enter a date and time'
  if (to === null) errors.to = 'Enter a date and time'
  if (from && to && from > to) errors.to = 'Must not be before “From”'
  const text = (value: string) => value.trim() || undefined
  return {
    errors,
    filters: defined({
      action: text(draft.action),
      actor: text(draft.actor),
      resource: text(draft.resource),
      outcome: OUTCOMES.find((outcome) => outcome === draft.outcome),
      from: from ?? undefined,
      to: to ?? undefined,
    }),
  }
}

/**
 * The list's filters: a form applied on Enter or with its button (the URL then holds them), and
 * cleared in one action. When the URL's filters change otherwise (back and forward, a filter set
 * from a record's details, clearing), the form takes them, so it shows what the list shows.
 */
export function AuditFiltersForm(props: {
  filters: AuditFilters
  onApply(filters: AuditFilters): void
  onClear(): void
}) {
  const [draft, setDraft] = useState(() => draftOf(props.filters))
  const [errors, setErrors] = useState<Partial<Record<'from' | 'to', string>>>({})
  const signature = JSON.stringify(props.filters)
  const [shown, setShown] = useState(signature)
  if (shown !== signature) {
    setShown(signature)
    setDraft(draftOf(props.filters))
    setErrors({})
  }
  // A change clears the errors shown: an invalid field also blocks the form's native submit.
  const set = (field: keyof Draft) => (value: string) => {
    setDraft((previous) => ({ ...previous, [field]: value }))
    setErrors({})
  }
  const checked = check(draft)
  const query = new URLSearchParams(
    Object.entries(apiQuery(checked.filters, PAGE_SIZE)).map(([name, value]) => [name, String(value)]),
  )

  const submit = (event: FormEvent) => {
    event.preventDefault()
    setErrors(checked.errors)
    if (Object.keys(checked.errors).length === 0) props.onApply(checked.filters)
  }

  return (
    <search className="section audit-filters" aria-labelledby="audit-filters-title">
      <form onSubmit={submit}>
        <h2 id="audit-filters-title" className="audit-filters-title">
          Filters
        </h2>
        <div className="audit-filter-fields">
          <TextInput
            label="Action"
            value={draft.action}
            onChange={set('action')}
            description="Exact name, e.g. keys.create"
            maxLength={100}
          />
          <TextInput
            label="Actor"
            value={draft.actor}
            onChange={set('actor')}
            description="Part of the actor or a member’s e-mail (matched by the console)"
            maxLength={200}
          />
          <TextInput
            label="Resource"
            value={draft.resource}
            onChange={set('resource')}
            description="Exact, e.g. key:<id>"
            maxLength={300}
          />
          <SelectInput
            label="Outcome"
            value={draft.outcome}
            options={OUTCOME_OPTIONS}
            onChange={set('outcome')}
          />
          <TextInput
            label="From"
            type="datetime-local"
            value={draft.from}
            onChange={set('from')}
            description={`At or after, ${TIME_ZONE} time`}
            error={errors.from}
          />
          <TextInput
            label="To"
            type="datetime-local"
            value={draft.to}
            onChange={set('to')}
            description={`Before, ${TIME_ZONE} time`}
            error={errors.to}
          />
        </div>
        <div className="row audit-filter-actions">
          <Button type="submit" variant="primary">
            Apply filters
          </Button>
          {hasFilters(props.filters) && (
            <Button variant="quiet" onPress={props.onClear}>
              Clear filters
            </Button>
          )}
        </div>
        <EquivalentRequest method="GET" path={`/api/v1/audit?${query.toString()}`} />
        {checked.filters.actor && (
          <p className="muted audit-note">
            The API has no actor filter: the console reads the records matching the other filters and keeps
            those whose actor matches.
          </p>
        )}
      </form>
    </search>
  )
}
