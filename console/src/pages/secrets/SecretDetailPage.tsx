import { PageHeader } from '../../ui/Page.tsx'

export function SecretDetailPage() {
  return <PageHeader title="Secret" />
}
