import { PageHeader } from '../../ui/Page.tsx'

export function SettingsPage() {
  return <PageHeader title="Tenant settings" />
}
