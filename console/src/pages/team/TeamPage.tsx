import { PageHeader } from '../../ui/Page.tsx'

export function TeamPage() {
  return <PageHeader title="Team" />
}
