// The API's types, generated from the service's OpenAPI document into the SDK
// (packages/sdk/src/schema.ts, kept current by test/sdk/sdk-api-types.test.ts): one generated
// file for the SDK, the CLI and the console. Type-only: nothing of the SDK enters the bundle.
export type { components, operations, paths } from '../../../packages/sdk/src/schema.ts'
