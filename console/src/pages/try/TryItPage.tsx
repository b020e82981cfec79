import { PageHeader } from '../../ui/Page.tsx'

export function TryItPage() {
  return <PageHeader title="Try it" />
}
