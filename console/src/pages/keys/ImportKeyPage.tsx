import { PageHeader } from '../../ui/Page.tsx'

export function ImportKeyPage() {
  return <PageHeader title="Import a key" />
}
