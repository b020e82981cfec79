import { PageHeader } from '../../ui/Page.tsx'

export function KeysPage() {
  return <PageHeader title="Keys" />
}
