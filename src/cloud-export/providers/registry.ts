import type { CloudProvider, CloudProviderAdapter } from '../provider.ts'

/** Every provider this release speaks to (docs/cloud-export.md). */
export const CLOUD_ADAPTERS: Partial<Record<CloudProvider, CloudProviderAdapter>> = {}
