import { Button } from './Button.tsx'

/** Previous / next over a list whose page is in the URL; `total` when the API gives it. */
export function Pagination(props: {
  page: number
  pageSize: number
  shown: number
  total?: number | undefined
  hasMore?: boolean
  onPage(page: number): void
}) {
  const last = props.total !== undefined ? Math.max(1, Math.ceil(props.total / props.pageSize)) : undefined
  const hasNext = last !== undefined ? props.page < last : (props.hasMore ?? props.shown === props.pageSize)
  return (
    <nav className="pagination" aria-label="Pages">
      <Button variant="quiet" isDisabled={props.page <= 1} onPress={() => props.onPage(props.page - 1)}>
        Previous
      </Button>
      <span>
        Page {props.page}
        {last !== undefined ? ` of ${last}` : ''}
        {props.total !== undefined ? ` · ${props.total} in all` : ''}
      </span>
      <Button variant="quiet" isDisabled={!hasNext} onPress={() => props.onPage(props.page + 1)}>
        Next
      </Button>
    </nav>
  )
}
