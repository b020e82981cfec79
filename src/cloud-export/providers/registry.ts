import type { CloudProvider, CloudProviderAdapter } from '../provider.ts'
import { awsProvider } from './aws.ts'
import { azureProvider } from './azure.ts'
import { gcpProvider } from './gcp.ts'
import { scalewayProvider } from './scaleway.ts'

/** Every provider this release speaks to (docs/cloud-export.md). */
export const CLOUD_ADAPTERS: Partial<Record<CloudProvider, CloudProviderAdapter>> = {
  aws: awsProvider,
  azure: azureProvider,
  gcp: gcpProvider,
  scaleway: scalewayProvider,
}
