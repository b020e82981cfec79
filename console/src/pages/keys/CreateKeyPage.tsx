import { PageHeader } from '../../ui/Page.tsx'

export function CreateKeyPage() {
  return <PageHeader title="Create a key" />
}
