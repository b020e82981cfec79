import { secretKeyFormat } from '../api-keys/api-key-format.ts'

/** Partner API keys: `kmsp_…`, their own prefix (src/api-keys/api-key-format.ts has the scheme). */
export const PARTNER_KEY_PREFIX = 'kmsp_'
export const partnerKeys = secretKeyFormat(PARTNER_KEY_PREFIX)
