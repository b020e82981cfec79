import { createHash } from 'node:crypto'
import type { Actor } from '../auth/request-context.ts'
import type { IssuerSigner } from '../crypto/issuer-signer.ts'
import type { Sql } from '../data/database.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError } from '../platform/errors.ts'
import { isUuid } from '../platform/ids.ts'
import type { RevocationReason } from './crl.ts'
import { parseDer } from './der.ts'
import {
  buildOcspResponse,
  certIdNamesIssuer,
  OCSP_LIMITS,
  type OcspCertId,
  type OcspCertStatus,
  OcspRequestError,
  parseOcspRequest,
  responderKeyHash,
  unsignedOcspResponse,
} from './ocsp.ts'
import { getOcspCa, type OcspCaRow, serialStatuses } from './ocsp-store.ts'
import { type IssuerAlgorithm, parseCertificate, readSubjectPublicKeyInfo } from './x509.ts'

const HOUR_MS = 3_600_000
/** A response is valid 12 hours (nextUpdate), as Vault's are. */
const OCSP_RESPONSE_LIFETIME_MS = 12 * HOUR_MS
/**
 * How long a signed response is answered again from the cache (while the CA's revocations did not
 * change): its thisUpdate is then at most an hour old and it has 11 hours left at least.
 */
const OCSP_REUSE_MS = HOUR_MS

/** Base64 of the largest request, the only alphabet (standard or URL-safe) a GET path may use. */
const MAX_GET_CHARS = Math.ceil(OCSP_LIMITS.requestBytes / 3) * 4
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/

const MALFORMED = unsignedOcspResponse('malformedRequest')
const UNAUTHORIZED = unsignedOcspResponse('unauthorized')
const TRY_LATER = unsignedOcspResponse('tryLater')
const INTERNAL_ERROR = unsignedOcspResponse('internalError')

interface OcspResponderStats {
  /** BasicOCSPResponses signed since the responder was made. */
  signatures: number
  /** Requests answered with a response signed earlier. */
  cacheHits: number
  /** Requests that waited for an identical request's signature. */
  sharedInFlight: number
  /** Responses kept now. */
  cached: number
}

/**
 * The OCSP responder of the tenants' CAs (docs/pki.md, "OCSP"). Public and unauthenticated, so
 * it signs only for serials the CA issued or revoked and signs the same answer once: responses
 * are kept per (CA, CertIDs asked) while the CA's revocations do not change.
 */
export interface OcspResponder {
  /**
   * The DER OCSPResponse to a DER OCSPRequest for the CA `caId`. Bad input is never an error: a
   * malformed or over-large request is `malformedRequest`, a CA or certificate the responder does
   * not answer for is `unauthorized`, a busy or unusable CA key `tryLater` / `internalError`.
   */
  respond(caId: string, request: Buffer): Promise<Buffer>
  /** The same for a GET (RFC 6960 Appendix A.1): the request as Base64 (URL-decoded already). */
  respondToGet(caId: string, base64Request: string): Promise<Buffer>
  stats(): OcspResponderStats
}

interface CachedResponse {
  /** The CA's crl_number when the response was signed. */
  generation: string
  der: Buffer
  /** Epoch ms until which it is answered again. */
  reuseUntil: number
}

/** A least-recently-used map bounded both in entries and in bytes (ML-DSA responses are ~4 KB). */
function createResponseCache(limits: { maxEntries: number; maxBytes: number }) {
  const entries = new Map<string, CachedResponse>()
  let bytes = 0
  const drop = (key: string) => {
    const entry = entries.get(key)
    if (!entry) return
    bytes -= entry.der.length
    entries.delete(key)
  }
  return {
    get(key: string): CachedResponse | undefined {
      const entry = entries.get(key)
      if (entry) {
        // Map iteration is insertion order: re-inserting makes it the most recently used.
        entries.delete(key)
        entries.set(key, entry)
      }
      return entry
    },
    set(key: string, entry: CachedResponse): void {
      drop(key)
      if (entry.der.length > limits.maxBytes) return
      entries.set(key, entry)
      bytes += entry.der.length
      for (const oldest of entries.keys()) {
        if (entries.size <= limits.maxEntries && bytes <= limits.maxBytes) break
        drop(oldest)
      }
    },
    get size() {
      return entries.size
    },
  }
}

/** What identifies the question: the CA and the CertIDs exactly as asked (they are answered back). */
function cacheKey(caId: string, certIds: readonly OcspCertId[]): string {
  const hash = createHash('sha256').update(caId)
  for (const { raw } of certIds) {
    const length = Buffer.alloc(4)
    length.writeUInt32BE(raw.length)
    hash.update(length).update(raw)
  }
  return hash.digest('base64')
}

/** The CA certificate's subject Name (DER) and subjectPublicKey bits: what CertIDs hash. */
function issuerOf(certificate: Buffer): { subject: Buffer; subjectPublicKey: Buffer } {
  const parsed = parseCertificate(certificate)
  return {
    subject: parsed.subject,
    subjectPublicKey: readSubjectPublicKeyInfo(parseDer(parsed.subjectPublicKeyInfo)),
  }
}

const serialHex = (serial: Buffer) => serial.toString('hex')

export function createOcspResponder(deps: {
  sql: Sql
  signer: IssuerSigner
  clock: Clock
  cache?: { maxEntries?: number; maxBytes?: number }
}): OcspResponder {
  const cache = createResponseCache({
    maxEntries: deps.cache?.maxEntries ?? 10_000,
    maxBytes: deps.cache?.maxBytes ?? 32 * 1024 * 1024,
  })
  /** Identical questions being answered now, by cache key and generation: one signature for all. */
  const inFlight = new Map<string, Promise<Buffer>>()
  const counters = { signatures: 0, cacheHits: 0, sharedInFlight: 0 }

  /** The statuses, signed; or unauthorized when the CA never issued nor revoked a serial asked. */
  async function answer(
    ca: OcspCaRow,
    certIds: readonly OcspCertId[],
    now: Date,
  ): Promise<{ der: Buffer; signed: boolean }> {
    const unsigned = (der: Buffer) => ({ der, signed: false })
    const issuer = issuerOf(ca.certificate!)
    // The responder answers for its own CA alone, and for serials a certificate can carry.
    if (!certIds.every((id) => id.serial.length <= 20 && certIdNamesIssuer(id, issuer)))
      return unsigned(UNAUTHORIZED)
    const known = await serialStatuses(deps.sql, ca, [...new Set(certIds.map((id) => serialHex(id.serial)))])
    const statuses: OcspCertStatus[] = []
    for (const id of certIds) {
      const status = known.get(serialHex(id.serial))
      // Never issued by the CA (or issued with noStore and not revoked): not ours to vouch for, and
      // no signature is made for it, so random serials cannot make the responder sign.
      if (!status) return unsigned(UNAUTHORIZED)
      statuses.push(
        status.revocation
          ? {
              status: 'revoked',
              revokedAt: status.revocation.revokedAt,
              reason: status.revocation.reason as RevocationReason,
            }
          : { status: 'good' },
      )
    }
    const thisUpdate = new Date(Math.floor(now.getTime() / 1000) * 1000)
    const nextUpdate = new Date(thisUpdate.getTime() + OCSP_RESPONSE_LIFETIME_MS)
    // The CA signs as itself, for no caller: a system actor of the CA's tenant.
    const actor: Actor = { tenantId: ca.tenant_id, actor: 'ocsp', requestId: null, clientIp: null }
    try {
      const key = await deps.signer.open(actor, {
        keyId: ca.key_id,
        keyVersion: ca.key_version,
        issuer: 'pki',
      })
      const der = await buildOcspResponse(
        {
          responderKeyHash: responderKeyHash(issuer.subjectPublicKey),
          producedAt: thisUpdate,
          signatureAlgorithm: ca.algorithm as IssuerAlgorithm,
          responses: certIds.map((id, i) => ({
            certId: id.raw,
            status: statuses[i]!,
            thisUpdate,
            nextUpdate,
          })),
        },
        (tbs) => key.sign(tbs),
      )
      counters.signatures++
      return { der, signed: true }
    } catch (error) {
      if (!(error instanceof AppError)) throw error
      // The crypto pool's per-tenant queue is full or timed out: the client may retry; any other
      // refusal (the CA's key not Active any more) means the CA cannot sign now.
      return unsigned(error.statusCode === 429 || error.statusCode === 503 ? TRY_LATER : INTERNAL_ERROR)
    }
  }

  async function respond(caId: string, request: Buffer): Promise<Buffer> {
    let certIds: OcspCertId[]
    try {
      // The nonce, if any, is not echoed: a response without one can be answered again.
      certIds = parseOcspRequest(request).certIds
    } catch (error) {
      if (error instanceof OcspRequestError) return MALFORMED
      throw error
    }
    if (typeof caId !== 'string' || !isUuid(caId)) return UNAUTHORIZED
    const ca = await getOcspCa(deps.sql, caId.toLowerCase())
    const now = deps.clock.now()
    if (ca?.status !== 'active' || !ca.certificate || !ca.not_after || ca.not_after <= now)
      return UNAUTHORIZED
    // A revocation marks the CA stale in its own transaction, and the CRL build that follows
    // raises crl_number: while stale nothing is reused, so a revocation is answered at once.
    if (ca.crl_stale) return (await answer(ca, certIds, now)).der
    const generation = ca.crl_number
    const key = cacheKey(ca.id, certIds)
    const cached = cache.get(key)
    if (cached && cached.generation === generation && now.getTime() < cached.reuseUntil) {
      counters.cacheHits++
      return cached.der
    }
    const flightKey = `${key}@${generation}`
    const pending = inFlight.get(flightKey)
    if (pending) {
      counters.sharedInFlight++
      return pending
    }
    const signing = answer(ca, certIds, now)
      .then(({ der, signed }) => {
        // Only signed answers are kept: the unsigned ones cost nothing to make again.
        if (signed) cache.set(key, { generation, der, reuseUntil: now.getTime() + OCSP_REUSE_MS })
        return der
      })
      .finally(() => inFlight.delete(flightKey))
    inFlight.set(flightKey, signing)
    return signing
  }

  return {
    respond,

    async respondToGet(caId, base64Request) {
      if (
        typeof base64Request !== 'string' ||
        base64Request.length > MAX_GET_CHARS ||
        !BASE64.test(base64Request)
      )
        return MALFORMED
      return respond(caId, Buffer.from(base64Request, 'base64'))
    },

    stats: () => ({ ...counters, cached: cache.size }),
  }
}
