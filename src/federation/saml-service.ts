import { randomUUID } from 'node:crypto'
import { type CacheProvider, SAML, ValidateInResponseTo } from '@node-saml/node-saml'
import { DOMParser } from '@xmldom/xmldom'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Sql } from '../data/database.ts'
import { applyPatch } from '../http/patch.ts'
import type { SignInFederation } from '../identity/sign-in/sign-in-types.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, invalidField, isUniqueViolation, notFound } from '../platform/errors.ts'
import { clipText } from '../platform/text.ts'
import { isLoopbackHost } from '../platform/urls.ts'
import { parseSigningCertificate } from './saml-certificate.ts'
import {
  answerSamlRequest,
  deleteIdp,
  findFederatedAccount,
  getIdp,
  idpsForApplication,
  insertIdp,
  insertSamlRequest,
  linkFederatedAccount,
  listIdps,
  markAssertionSeen,
  openSamlRequest,
  requestExists,
  type SamlIdpFields,
  type SamlIdpRow,
  setRequestAccount,
  sweepSaml,
  takeRequestResult,
  updateIdp,
} from './saml-store.ts'

export const SAML_LIMITS = {
  nameChars: 100,
  entityIdChars: 1024,
  urlChars: 2048,
  attributeChars: 256,
  applications: 100,
  /** A SAMLResponse form field (Base64 of the signed XML). */
  responseChars: 256 * 1024,
} as const

/**
 * Timing (docs/identity.md "SAML federation"): an AuthnRequest is answered within 10 minutes;
 * clocks may differ by a minute; an assertion id is remembered for a day.
 */
const SAML_TIMING = {
  requestMs: 10 * 60_000,
  clockSkewMs: 60_000,
  seenAssertionMs: 24 * 60 * 60_000,
} as const

/** The NameID of the assertion's subject, as an attribute name in the mapping. */
export const NAME_ID = 'NameID'

interface AttributeMapping {
  /** The attribute carrying the e-mail address, or NameID. */
  email: string
  /** The attribute carrying the display name, if any. */
  name?: string | undefined
}

interface SamlIdpInput {
  name: string
  entityId: string
  ssoUrl: string
  /** Base64 X.509 body, or a full PEM. */
  certificate: string
  attributeMapping?: AttributeMapping | undefined
  applicationIds?: string[] | undefined
  /**
   * Trusted to link a first sign-in to an existing end-user who has a password or a second factor,
   * by the address it asserts (default false). Only owners and admins register IdPs at all (the
   * routes' access), and setting it is audited `federation.saml_idp.link_trust`.
   */
  linkByVerifiedEmail?: boolean | undefined
}

type SamlIdpPatch = Partial<SamlIdpInput>

interface SamlIdpView {
  id: string
  name: string
  entityId: string
  ssoUrl: string
  certificate: string
  certificateSha256: string
  certificateNotAfter: string
  attributeMapping: AttributeMapping
  applicationIds: string[]
  linkByVerifiedEmail: boolean
  /** What to enter at the IdP: this registration's SP entity id, ACS URL and metadata. */
  serviceProvider: { entityId: string; acsUrl: string; metadataUrl: string }
  createdAt: string
  updatedAt: string
}

/** Why a SAML response was not accepted (audited; the page says only that it failed). */
export type FederationFailure =
  | 'unknown_idp'
  | 'invalid_response'
  | 'wrong_destination'
  | 'wrong_issuer'
  | 'replayed'
  | 'unknown_request'
  | 'missing_email'
  | 'blocked'
  /** The address is an end-user's who has a password or a factor, and the IdP is not trusted to link. */
  | 'account_has_credentials'

export class FederationError extends Error {
  readonly reason: FederationFailure
  /** The sign-in the refused response answered, when known: the page links back to it. */
  readonly interactionUid: string | undefined
  constructor(reason: FederationFailure, options: { detail?: string; interactionUid?: string } = {}) {
    super(options.detail ? `${reason}: ${options.detail}` : reason)
    this.reason = reason
    this.interactionUid = options.interactionUid
  }
}

/**
 * The end-user a first sign-in is linked to, as the end-users module decides it: a new one, an
 * existing one, or a refusal (blocked; or it has credentials of its own and the IdP is not trusted).
 */
type FederatedAccountResult =
  | { outcome: 'created' | 'existing' | 'existing_by_trust'; accountId: string }
  | { outcome: 'blocked' }
  | { outcome: 'has_credentials'; accountId: string }

/** What federation needs of the other modules. */
export interface FederationDirectories {
  applicationExists(tenantId: string, applicationId: string): Promise<boolean>
  /**
   * The tenant's end-user with this address, created when new. An existing one with a password or
   * a factor only when `linkByVerifiedEmail` (the registration's trust flag).
   */
  federatedAccount(input: {
    tenantId: string
    email: string
    displayName: string | null
    idpId: string
    linkByVerifiedEmail: boolean
  }): Promise<FederatedAccountResult>
}

/** The sign-in pages' part (providersFor, startUrl, takeResult) is the sign-in flow's contract. */
export interface FederationService extends SignInFederation {
  list(actor: Actor, page: { limit: number; offset: number }): Promise<{ data: SamlIdpView[]; total: number }>
  get(actor: Actor, id: string): Promise<SamlIdpView>
  create(actor: Actor, input: SamlIdpInput): Promise<SamlIdpView>
  update(actor: Actor, id: string, patch: SamlIdpPatch): Promise<SamlIdpView>
  remove(actor: Actor, id: string): Promise<void>
  /** The SP metadata XML of a registration; undefined when there is none. */
  metadata(idpId: string): Promise<string | undefined>

  /** The ACS: checks a response; the request it answers, now holding the account it signed in. */
  acceptResponse(
    idpId: string,
    form: { SAMLResponse: string; clientIp: string | null },
  ): Promise<{ requestId: string; interactionUid: string }>
  sweep(): Promise<number>
}

/** The parts of the verified assertion (node-saml's xml2js form) read here. */
interface VerifiedAssertion {
  Assertion?: {
    $?: { ID?: string }
    Subject?: Array<{
      SubjectConfirmation?: Array<{ SubjectConfirmationData?: Array<{ $?: { Recipient?: string } }> }>
    }>
  }
}

/** The response's root element; undefined when it is not XML at all. */
function parseRoot(samlResponse: string) {
  try {
    return (
      new DOMParser({ onError: () => {} }).parseFromString(
        Buffer.from(samlResponse, 'base64').toString('utf8'),
        'text/xml',
      ).documentElement ?? undefined
    )
  } catch {
    return undefined
  }
}

/** https, or http on a loopback host (an IdP on the same machine, as in tests and development). */
function checkSsoUrl(value: string): string {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw invalidField('body/ssoUrl', 'must be an absolute URL')
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname)))
    throw invalidField('body/ssoUrl', 'must be https (http only on localhost or 127.0.0.1)')
  if (url.username || url.password) throw invalidField('body/ssoUrl', 'must not carry credentials')
  if (url.hash) throw invalidField('body/ssoUrl', 'must not have a fragment')
  return url.toString()
}

/**
 * SAML identity-provider federation (docs/identity.md "SAML federation"). The service is the
 * service provider, one SP entity per registration; SP-initiated sign-in only (a response must
 * answer an AuthnRequest this service sent, once, within its time). Checking a response is
 * @node-saml/node-saml's: the response and its assertion both signed by the registered
 * certificate, issuer, audience, time conditions and InResponseTo. This module adds the
 * Destination check, the binding of the request to the sign-in that sent it, and replay
 * protection that holds across processes (one UPDATE and one unique insert in PostgreSQL).
 */
export function createFederationService(deps: {
  sql: Sql
  audit: AuditLog
  clock: Clock
  /** The issuer (ID_URL): the SP's URLs are under it. */
  baseUrl: () => string
  directories: FederationDirectories
}): FederationService {
  const { sql, audit, clock } = deps
  const missing = () => notFound('saml_idp_not_found', 'SAML identity provider')
  const duplicate = () =>
    new AppError(409, 'saml_idp_exists', 'The tenant already has an identity provider with this entity id')

  const spOf = (idpId: string) => {
    const entityId = `${deps.baseUrl()}/saml/${idpId}`
    return { entityId, acsUrl: `${entityId}/acs`, metadataUrl: `${entityId}/metadata` }
  }

  const toView = (row: SamlIdpRow): SamlIdpView => ({
    id: row.id,
    name: row.name,
    entityId: row.entity_id,
    ssoUrl: row.sso_url,
    certificate: row.certificate,
    certificateSha256: row.certificate_sha256,
    certificateNotAfter: row.certificate_not_after.toISOString(),
    attributeMapping: row.attribute_mapping,
    applicationIds: row.application_ids,
    linkByVerifiedEmail: row.link_by_verified_email,
    serviceProvider: spOf(row.id),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  })

  async function fieldsOf(tenantId: string, input: SamlIdpInput): Promise<SamlIdpFields> {
    const certificate = parseSigningCertificate(input.certificate, clock.now())
    const applicationIds = input.applicationIds ?? []
    if (new Set(applicationIds).size !== applicationIds.length)
      throw invalidField('body/applicationIds', 'must not repeat an id')
    for (const [index, id] of applicationIds.entries())
      if (!(await deps.directories.applicationExists(tenantId, id)))
        throw invalidField(`body/applicationIds/${index}`, 'is not an application of this tenant')
    const name = input.name.trim()
    if (!name) throw invalidField('body/name', 'must not be blank')
    const mapping = input.attributeMapping ?? { email: NAME_ID }
    return {
      name,
      entity_id: input.entityId.trim(),
      sso_url: checkSsoUrl(input.ssoUrl),
      certificate: certificate.pem,
      certificate_sha256: certificate.sha256,
      certificate_not_after: certificate.notAfter,
      attribute_mapping: { email: mapping.email, ...(mapping.name ? { name: mapping.name } : {}) },
      application_ids: applicationIds,
      link_by_verified_email: input.linkByVerifiedEmail ?? false,
    }
  }

  const inputOf = (row: SamlIdpRow): SamlIdpInput => ({
    name: row.name,
    entityId: row.entity_id,
    ssoUrl: row.sso_url,
    certificate: row.certificate,
    attributeMapping: row.attribute_mapping,
    applicationIds: row.application_ids,
    linkByVerifiedEmail: row.link_by_verified_email,
  })

  /**
   * Stores a registration (new, or changed) with its audit record, in one transaction. `trustWas`:
   * the trust flag before (false for a new registration); a change of it gets a record of its own,
   * so that who made an IdP able to take over accounts by address is one search away.
   */
  async function write(
    actor: Actor,
    id: string,
    verb: 'create' | 'update',
    fields: SamlIdpFields,
    trustWas: boolean,
  ) {
    try {
      return await sql.begin(async (tx) => {
        const row =
          verb === 'create'
            ? await insertIdp(tx, { ...fields, id, tenant_id: actor.tenantId, created_by: actor.actor })
            : await updateIdp(tx, actor.tenantId, id, fields)
        if (!row) throw missing()
        await audit.recordInTransaction(tx, {
          ...actor,
          action: `federation.saml_idp.${verb}`,
          resource: `saml_idp:${id}`,
          outcome: 'success',
          details: {
            entityId: fields.entity_id,
            certificateSha256: fields.certificate_sha256,
            linkByVerifiedEmail: fields.link_by_verified_email,
          },
        })
        if (fields.link_by_verified_email !== trustWas)
          await audit.recordInTransaction(tx, {
            ...actor,
            action: 'federation.saml_idp.link_trust',
            resource: `saml_idp:${id}`,
            outcome: 'success',
            details: { entityId: fields.entity_id, linkByVerifiedEmail: fields.link_by_verified_email },
          })
        return toView(row)
      })
    } catch (err) {
      if (isUniqueViolation(err, 'saml_idps_entity_unique')) throw duplicate()
      throw err
    }
  }

  /**
   * node-saml for one registration. Its InResponseTo cache is the saml_requests table: an
   * AuthnRequest is stored bound to the sign-in (interaction) that sent it, and a response is
   * accepted only while its request is open.
   */
  function samlFor(idp: SamlIdpRow, interactionUid?: string): SAML {
    const sp = spOf(idp.id)
    const cacheProvider: CacheProvider = {
      async saveAsync(key, value) {
        if (!interactionUid) return null
        const now = clock.now()
        await insertSamlRequest(sql, {
          id: key,
          idp_id: idp.id,
          interaction_uid: interactionUid,
          created_at: now,
          expires_at: new Date(now.getTime() + SAML_TIMING.requestMs),
        })
        return { value, createdAt: now.getTime() }
      },
      async getAsync(key) {
        const row = await openSamlRequest(sql, idp.id, key, clock.now())
        return row ? row.created_at.toISOString() : null
      },
      // Consumed by acceptResponse's own atomic update, not here.
      async removeAsync(key) {
        return key
      },
    }
    return new SAML({
      entryPoint: idp.sso_url,
      issuer: sp.entityId,
      callbackUrl: sp.acsUrl,
      audience: sp.entityId,
      idpCert: idp.certificate,
      idpIssuer: idp.entity_id,
      wantAuthnResponseSigned: true,
      wantAssertionsSigned: true,
      validateInResponseTo: ValidateInResponseTo.always,
      requestIdExpirationPeriodMs: SAML_TIMING.requestMs,
      acceptedClockSkewMs: SAML_TIMING.clockSkewMs,
      cacheProvider,
      identifierFormat: null,
      disableRequestedAuthnContext: true,
      signatureAlgorithm: 'sha256',
    })
  }

  const attributeOf = (profile: Record<string, unknown>, name: string): string | undefined => {
    if (name === NAME_ID) return typeof profile['nameID'] === 'string' ? profile['nameID'] : undefined
    const attributes = (profile['attributes'] ?? {}) as Record<string, unknown>
    const value = attributes[name]
    const first = Array.isArray(value) ? value[0] : value
    return typeof first === 'string' ? first.trim() : undefined
  }

  async function refuse(
    idp: SamlIdpRow | undefined,
    reason: FederationFailure,
    clientIp: string | null,
    more: { details?: Record<string, string>; interactionUid?: string } = {},
  ) {
    if (idp)
      await audit.record({
        tenantId: idp.tenant_id,
        actor: `saml_idp:${idp.id}`,
        action: 'federation.saml.sign_in',
        resource: `saml_idp:${idp.id}`,
        outcome: 'denied',
        clientIp,
        details: { reason, ...more.details },
      })
    return new FederationError(reason, more.interactionUid ? { interactionUid: more.interactionUid } : {})
  }

  return {
    async list(actor, page) {
      const { rows, total } = await listIdps(sql, actor.tenantId, page)
      return { data: rows.map(toView), total }
    },
    async get(actor, id) {
      const row = await getIdp(sql, actor.tenantId, id)
      if (!row) throw missing()
      return toView(row)
    },
    async create(actor, input) {
      return write(actor, randomUUID(), 'create', await fieldsOf(actor.tenantId, input), false)
    },
    async update(actor, id, patch) {
      const current = await getIdp(sql, actor.tenantId, id)
      if (!current) throw missing()
      const fields = await fieldsOf(actor.tenantId, applyPatch(inputOf(current), patch))
      return write(actor, id, 'update', fields, current.link_by_verified_email)
    },
    async remove(actor, id) {
      await sql.begin(async (tx) => {
        if (!(await deleteIdp(tx, actor.tenantId, id))) throw missing()
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'federation.saml_idp.delete',
          resource: `saml_idp:${id}`,
          outcome: 'success',
        })
      })
    },
    async metadata(idpId) {
      const idp = await getIdp(sql, undefined, idpId)
      return idp ? samlFor(idp).generateServiceProviderMetadata(null, null) : undefined
    },

    async providersFor(tenantId, applicationId) {
      return (await idpsForApplication(sql, tenantId, applicationId)).map((row) => ({
        id: row.id,
        name: row.name,
      }))
    },
    async startUrl({ idpId, tenantId, applicationId, interactionUid }) {
      const idp = (await idpsForApplication(sql, tenantId, applicationId)).find((row) => row.id === idpId)
      if (!idp) return undefined
      return samlFor(idp, interactionUid).getAuthorizeUrlAsync('', undefined, {})
    },
    async acceptResponse(idpId, { SAMLResponse, clientIp }) {
      const idp = await getIdp(sql, undefined, idpId)
      if (!idp) throw await refuse(undefined, 'unknown_idp', clientIp)
      // Read before the checks only to tell a replay from a response to no request of ours; every
      // value used afterwards comes from the verified document.
      const root = parseRoot(SAMLResponse)
      let profile: Record<string, unknown> | null
      try {
        ;({ profile } = (await samlFor(idp).validatePostResponseAsync({ SAMLResponse })) as {
          profile: Record<string, unknown> | null
        })
      } catch (err) {
        const inResponseTo = root?.getAttribute('InResponseTo')
        if (/InResponseTo/.test((err as Error).message) && inResponseTo)
          throw await refuse(
            idp,
            (await requestExists(sql, idp.id, inResponseTo)) ? 'replayed' : 'unknown_request',
            clientIp,
          )
        throw await refuse(idp, 'invalid_response', clientIp)
      }
      if (!profile) throw await refuse(idp, 'invalid_response', clientIp)
      // The response must be addressed to this ACS (node-saml does not check Destination). The
      // root is the signed element, so the attribute read here is the one the IdP signed.
      if (root?.getAttribute('Destination') !== spOf(idp.id).acsUrl)
        throw await refuse(idp, 'wrong_destination', clientIp)
      // The issuer must be the registered IdP (node-saml's idpIssuer is not applied to responses):
      // the signed assertion's, and the response's when it names one.
      const responseIssuer = Array.from(root.childNodes).find(
        (node) => (node as { localName?: string }).localName === 'Issuer',
      )?.textContent
      if (
        profile['issuer'] !== idp.entity_id ||
        (responseIssuer != null && responseIssuer.trim() !== idp.entity_id)
      )
        throw await refuse(idp, 'wrong_issuer', clientIp)
      const requestId = typeof profile['inResponseTo'] === 'string' ? profile['inResponseTo'] : undefined
      const assertion = (profile['getAssertion'] as (() => VerifiedAssertion) | undefined)?.()
      const assertionId = assertion?.Assertion?.$?.ID
      // The bearer confirmation must name this ACS as its recipient (node-saml does not check it).
      const recipients = (assertion?.Assertion?.Subject?.[0]?.SubjectConfirmation ?? []).map(
        (confirmation) => confirmation.SubjectConfirmationData?.[0]?.$?.Recipient,
      )
      if (recipients.length === 0 || recipients.some((recipient) => recipient !== spOf(idp.id).acsUrl))
        throw await refuse(idp, 'wrong_destination', clientIp)
      const nameId = attributeOf(profile, NAME_ID)
      if (!requestId || !assertionId || !nameId) throw await refuse(idp, 'invalid_response', clientIp)
      const now = clock.now()
      // Exactly one response per request, and each assertion once, in every process.
      const answered = await sql.begin(async (tx) => {
        const request = await answerSamlRequest(tx, { idpId: idp.id, id: requestId, now })
        if (!request) return undefined
        const fresh = await markAssertionSeen(tx, {
          idpId: idp.id,
          assertionId: clipText(assertionId, 256),
          expiresAt: new Date(now.getTime() + SAML_TIMING.seenAssertionMs),
        })
        return fresh ? request : undefined
      })
      if (!answered) throw await refuse(idp, 'replayed', clientIp)
      let accountId = await findFederatedAccount(sql, idp.id, clipText(nameId, 512))
      /** How the subject came to its account, on its first sign-in (audited with it). */
      let linked: string | undefined
      if (!accountId) {
        const email = attributeOf(profile, idp.attribute_mapping.email)
        if (!email) throw await refuse(idp, 'missing_email', clientIp)
        const displayName = idp.attribute_mapping.name
          ? (attributeOf(profile, idp.attribute_mapping.name)?.toWellFormed().slice(0, 200) ?? null)
          : null
        let found: FederatedAccountResult
        try {
          found = await deps.directories.federatedAccount({
            tenantId: idp.tenant_id,
            email,
            displayName,
            idpId: idp.id,
            linkByVerifiedEmail: idp.link_by_verified_email,
          })
        } catch (err) {
          if (err instanceof AppError && err.statusCode === 400)
            throw await refuse(idp, 'missing_email', clientIp)
          throw err
        }
        if (found.outcome === 'blocked') throw await refuse(idp, 'blocked', clientIp)
        // Whoever controls the IdP decides what it asserts: an address alone does not get it into
        // an account someone secured with a password or a factor. The person signs in with those
        // instead (the page says so); no link is made, so the next response is checked again.
        if (found.outcome === 'has_credentials')
          throw await refuse(idp, 'account_has_credentials', clientIp, {
            details: { enduser: found.accountId },
            interactionUid: answered.interaction_uid,
          })
        accountId = found.accountId
        linked = found.outcome
        await linkFederatedAccount(sql, {
          idpId: idp.id,
          nameId: clipText(nameId, 512),
          tenantId: idp.tenant_id,
          accountId,
        })
      }
      await setRequestAccount(sql, answered.id, accountId)
      await audit.record({
        tenantId: idp.tenant_id,
        actor: `saml_idp:${idp.id}`,
        action: 'federation.saml.sign_in',
        resource: `enduser:${accountId}`,
        outcome: 'success',
        clientIp,
        details: { assertionId: clipText(assertionId, 256), ...(linked ? { linked } : {}) },
      })
      return { requestId: answered.id, interactionUid: answered.interaction_uid }
    },
    async takeResult(requestId, interactionUid) {
      const accountId = await takeRequestResult(sql, { id: requestId, interactionUid, now: clock.now() })
      return accountId ? { accountId } : undefined
    },
    sweep: () => sweepSaml(sql, clock.now()),
  }
}
