import { PageHeader } from '../../ui/Page.tsx'

export function AuditPage() {
  return <PageHeader title="Audit log" />
}
