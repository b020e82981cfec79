import { PageHeader } from '../../ui/Page.tsx'

export function KeyDetailPage() {
  return <PageHeader title="Key" />
}
