import { PageHeader } from '../../ui/Page.tsx'

export function SecretsPage() {
  return <PageHeader title="Secrets" />
}
