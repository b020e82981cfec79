import { PageHeader } from '../../ui/Page.tsx'

export function ApiKeysPage() {
  return <PageHeader title="API keys" />
}
