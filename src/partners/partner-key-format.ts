import { secretKeyFormat } from '../auth/api-key-format.ts'

/** Partner API keys: `kmsp_…`, their own prefix (src/auth/api-key-format.ts has the scheme). */
export const PARTNER_KEY_PREFIX = 'kmsp_'
export const partnerKeys = secretKeyFormat(PARTNER_KEY_PREFIX)
