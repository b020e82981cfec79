import { Type } from 'typebox'
import { nameSchema, PageQuery, Printable, Timestamp, Uuid } from '../http/http-schemas.ts'
import { CERTIFICATE_MAX_CHARS } from './saml-certificate.ts'
import { NAME_ID, SAML_LIMITS } from './saml-service.ts'

const Attribute = (description: string) =>
  Printable(SAML_LIMITS.attributeChars, `${description}: an attribute name of the assertion, or ${NAME_ID}`)

const AttributeMappingSchema = Type.Object(
  {
    email: Attribute('Carries the e-mail address'),
    name: Type.Optional(Attribute('Carries the display name')),
  },
  {
    additionalProperties: false,
    description: `Which assertion attributes fill the account (default: email from ${NAME_ID})`,
  },
)

const TRUST =
  'Trust this IdP to link its first sign-in of an address to an existing end-user who has a password or a second factor (otherwise that sign-in is refused and the person signs in with their password). Setting or clearing it is audited federation.saml_idp.link_trust'

const fields = {
  name: Printable(SAML_LIMITS.nameChars, 'Shown on the sign-in button ("Sign in with <name>")'),
  entityId: Printable(SAML_LIMITS.entityIdChars, 'The IdP’s entity id: the Issuer of its responses'),
  ssoUrl: Printable(
    SAML_LIMITS.urlChars,
    'The IdP’s SSO URL (HTTP-Redirect binding); https, or http on localhost',
  ),
  certificate: Type.String({
    minLength: 1,
    maxLength: CERTIFICATE_MAX_CHARS,
    description:
      'The IdP’s signing certificate: a Base64 X.509 body without headers, or a full PEM. 400 invalid_certificate, certificate_expired, certificate_not_yet_valid',
  }),
  attributeMapping: Type.Optional(AttributeMappingSchema),
  applicationIds: Type.Optional(
    Type.Array(Uuid('An application'), {
      maxItems: SAML_LIMITS.applications,
      description: 'Applications whose sign-in page offers this IdP; empty or absent: every application',
    }),
  ),
  linkByVerifiedEmail: Type.Optional(
    Type.Boolean({
      default: false,
      description: `${TRUST}. Default false`,
    }),
  ),
}

export const SamlIdpSchema = Type.Object(
  {
    id: Uuid('The registration'),
    name: Type.String(),
    entityId: Type.String(),
    ssoUrl: Type.String(),
    certificate: Type.String({ description: 'PEM' }),
    certificateSha256: Type.String({ description: 'SHA-256 fingerprint of the certificate' }),
    certificateNotAfter: Timestamp('The certificate expires then'),
    attributeMapping: Type.Object(
      { email: Type.String(), name: Type.Optional(Type.String()) },
      { additionalProperties: false },
    ),
    applicationIds: Type.Array(Type.String()),
    linkByVerifiedEmail: Type.Boolean({
      description: 'Trusted to link to end-users who have a password or a factor, by address',
    }),
    serviceProvider: Type.Object(
      {
        entityId: Type.String({ description: 'The SP entity id (the audience) to give the IdP' }),
        acsUrl: Type.String({ description: 'The assertion consumer service URL (HTTP-POST)' }),
        metadataUrl: Type.String({ description: 'The SP metadata for the IdP to import' }),
      },
      { additionalProperties: false },
    ),
    createdAt: Timestamp('Registered'),
    updatedAt: Timestamp('Last changed'),
  },
  { additionalProperties: false },
)
nameSchema(SamlIdpSchema, 'SamlIdentityProvider')

export const SamlIdpListSchema = Type.Object(
  { data: Type.Array(SamlIdpSchema), total: Type.Integer() },
  { additionalProperties: false },
)
nameSchema(SamlIdpListSchema, 'SamlIdentityProviderList')

export const SamlIdpBody = Type.Object(fields, {
  additionalProperties: false,
  examples: [
    {
      name: 'Acme Corp',
      entityId: 'https://idp.acme.example/saml',
      ssoUrl: 'https://idp.acme.example/saml/sso',
      certificate: 'MIIC8DCCAdigAwIBAgIQ...',
      attributeMapping: { email: 'email', name: 'displayName' },
    },
  ],
})
nameSchema(SamlIdpBody, 'SamlIdentityProviderInput')

export const SamlIdpPatchBody = Type.Object(
  {
    name: Type.Optional(fields.name),
    entityId: Type.Optional(fields.entityId),
    ssoUrl: Type.Optional(fields.ssoUrl),
    certificate: Type.Optional(fields.certificate),
    attributeMapping: fields.attributeMapping,
    applicationIds: fields.applicationIds,
    // No default here: a change that does not name the flag keeps it.
    linkByVerifiedEmail: Type.Optional(Type.Boolean({ description: TRUST })),
  },
  { additionalProperties: false, minProperties: 1, examples: [{ certificate: 'MIIC8DCCAdigAwIBAgIQ...' }] },
)
nameSchema(SamlIdpPatchBody, 'SamlIdentityProviderPatch')

export const SamlIdpListQuery = Type.Object({ ...PageQuery }, { additionalProperties: false })
