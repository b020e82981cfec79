import { type Static, Type } from 'typebox'
import { nameSchema, PageQuery, Printable, Text, Uuid } from '../http/http-schemas.ts'

/** The algorithms a CA's key may have (docs/pki.md): RFC 9881, RFC 9909 and the classical ones. */
export const CA_ALGORITHMS = [
  'ML-DSA-44',
  'ML-DSA-65',
  'ML-DSA-87',
  'SLH-DSA-128s',
  'EC-P256',
  'EC-P384',
  'RSA-3072',
  'RSA-4096',
  'Ed25519',
] as const

/** Key pairs the service generates for a leaf (the private key answered once, never stored). */
const LEAF_KEY_ALGORITHMS = [
  'EC-P256',
  'EC-P384',
  'RSA-2048',
  'RSA-3072',
  'RSA-4096',
  'Ed25519',
  'ML-DSA-44',
  'ML-DSA-65',
  'ML-DSA-87',
  'ML-KEM-512',
  'ML-KEM-768',
  'ML-KEM-1024',
] as const
export type LeafKeyAlgorithm = (typeof LEAF_KEY_ALGORITHMS)[number]

/** What a leaf's key may be, from a CSR or generated: LEAF_KEY_ALGORITHMS and the rest of CSRs'. */
export const ROLE_KEY_ALGORITHMS = [...LEAF_KEY_ALGORITHMS, 'EC-P521', 'SLH-DSA-128s'] as const

export const KEY_USAGES = [
  'digitalSignature',
  'contentCommitment',
  'keyEncipherment',
  'dataEncipherment',
  'keyAgreement',
] as const
export const EXT_KEY_USAGES = [
  'serverAuth',
  'clientAuth',
  'codeSigning',
  'emailProtection',
  'timeStamping',
  'ocspSigning',
] as const

const REVOCATION_REASONS = [
  'unspecified',
  'keyCompromise',
  'caCompromise',
  'affiliationChanged',
  'superseded',
  'cessationOfOperation',
  'privilegeWithdrawn',
] as const

const DAY = 86_400
/** Vault's practice (docs/pki.md): roots 2 to 10 years; leaves 30 to 90 days by default. */
export const CA_LIMITS = {
  rootDays: { min: 730, max: 3650, default: 3650 },
  intermediateDays: { min: 1, max: 3650, default: 1825 },
  /** The longest leaf any role may issue: 398 days, the CA/Browser Forum's ceiling. */
  maxLeafSeconds: 398 * DAY,
  leafTtlDefault: 30 * DAY,
  leafMaxTtlDefault: 90 * DAY,
  minLeafSeconds: 300,
  urls: 5,
  names: 100,
} as const

const DnsName = Type.String({
  minLength: 1,
  maxLength: 253,
  pattern: '^[A-Za-z0-9*._-]+$',
  description: 'A DNS name (ASCII, A-labels for international names)',
})
const IpText = Type.String({ minLength: 2, maxLength: 45, description: 'An IPv4 or IPv6 address' })
const Cidr = Type.String({ minLength: 3, maxLength: 49, description: 'An IPv4 or IPv6 range, as CIDR' })
const HttpUrl = Type.String({
  minLength: 8,
  maxLength: 2048,
  pattern: '^https?://[^\\s]+$',
  description: 'An http(s) URL',
})
const Urls = (description: string) => Type.Array(HttpUrl, { maxItems: CA_LIMITS.urls, description })

const SubjectInput = Type.Object(
  {
    commonName: Printable(64, 'CN (RFC 5280 ub-common-name: 64)'),
    organization: Type.Optional(Printable(64, 'O')),
    organizationalUnit: Type.Optional(Printable(64, 'OU')),
    country: Type.Optional(Type.String({ pattern: '^[A-Z]{2}$', description: 'C: ISO 3166 two letters' })),
    state: Type.Optional(Printable(128, 'ST')),
    locality: Type.Optional(Printable(128, 'L')),
  },
  { additionalProperties: false },
)

const NameConstraints = Type.Object(
  {
    permittedDnsDomains: Type.Optional(Type.Array(DnsName, { maxItems: CA_LIMITS.names })),
    excludedDnsDomains: Type.Optional(Type.Array(DnsName, { maxItems: CA_LIMITS.names })),
    permittedIpRanges: Type.Optional(Type.Array(Cidr, { maxItems: CA_LIMITS.names })),
    excludedIpRanges: Type.Optional(Type.Array(Cidr, { maxItems: CA_LIMITS.names })),
  },
  { additionalProperties: false, description: 'Names the CA and those below it may certify (critical)' },
)

export const CreateCaBody = Type.Object(
  {
    name: Printable(100, 'Unique within the tenant'),
    type: Type.Enum(['root', 'intermediate'], {
      description:
        'root: self-signed; intermediate: signed by parentId, or by an outside CA (parentId absent)',
    }),
    algorithm: Type.Optional(
      Type.Enum(CA_ALGORITHMS, {
        description: 'Default: ML-DSA-65, or the algorithm of the key keyId names',
      }),
    ),
    keyId: Type.Optional(
      Uuid('An existing Signing key of the tenant, not exportable (absent: a new key is generated)'),
    ),
    parentId: Type.Optional(Uuid('The CA of the tenant that signs this intermediate')),
    subject: SubjectInput,
    validityDays: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: CA_LIMITS.rootDays.max,
        description: 'Roots 730-3650 (default 3650); intermediates up to the parent end (default 1825)',
      }),
    ),
    pathLength: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, description: 'CAs allowed below' })),
    nameConstraints: Type.Optional(NameConstraints),
    crlDistributionPoints: Type.Optional(Urls('Default: this service’s public CRL URL of the CA')),
    issuingCertificateUrls: Type.Optional(
      Urls('AIA caIssuers; default: this service’s URL of the CA certificate'),
    ),
    ocspUrls: Type.Optional(Urls('AIA ocsp; default: this service’s OCSP responder of the CA')),
  },
  {
    additionalProperties: false,
    examples: [
      {
        name: 'root-2026',
        type: 'root',
        algorithm: 'ML-DSA-65',
        subject: { commonName: 'Example Root CA', organization: 'Example' },
        pathLength: 1,
      },
    ],
  },
)
export type CreateCaBody = Static<typeof CreateCaBody>
nameSchema(CreateCaBody, 'CreateCertificateAuthority')

export const UpdateCaBody = Type.Object(
  {
    crlDistributionPoints: Type.Optional(Urls('Before the first certificate only')),
    issuingCertificateUrls: Type.Optional(Urls('Before the first certificate only')),
    ocspUrls: Type.Optional(Urls('Before the first certificate only')),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    examples: [{ crlDistributionPoints: ['https://pki.example.com/crl/root-2026.crl'] }],
  },
)
export type UpdateCaBody = Static<typeof UpdateCaBody>
nameSchema(UpdateCaBody, 'UpdateCertificateAuthority')

export const ImportCaCertificateBody = Type.Object(
  {
    certificate: Text(65_536, 'The PEM certificate the outside parent issued for the CA’s CSR', 1),
    chain: Type.Optional(
      Type.Array(Text(65_536, 'PEM', 1), { maxItems: 8, description: 'The parent’s chain, issuer first' }),
    ),
  },
  {
    additionalProperties: false,
    examples: [{ certificate: '-----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----\n' }],
  },
)
export type ImportCaCertificateBody = Static<typeof ImportCaCertificateBody>
nameSchema(ImportCaCertificateBody, 'ImportCaCertificate')

const Pem = (description: string) => Type.String({ description })

export const CaSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  type: Type.Enum(['root', 'intermediate']),
  status: Type.Enum(['pending', 'active', 'revoked'], {
    description: 'pending: waiting for its certificate; revoked: its parent revoked its certificate',
  }),
  parentId: Type.Union([Type.String(), Type.Null()]),
  keyId: Type.String(),
  keyVersion: Type.Integer(),
  algorithm: Type.String(),
  subject: Type.Object({
    commonName: Type.String(),
    organization: Type.Optional(Type.String()),
    organizationalUnit: Type.Optional(Type.String()),
    country: Type.Optional(Type.String()),
    state: Type.Optional(Type.String()),
    locality: Type.Optional(Type.String()),
  }),
  pathLength: Type.Union([Type.Integer(), Type.Null()]),
  nameConstraints: Type.Union([NameConstraints, Type.Null()]),
  crlDistributionPoints: Type.Array(Type.String()),
  issuingCertificateUrls: Type.Array(Type.String()),
  ocspUrls: Type.Array(Type.String(), { description: 'AIA ocsp: the OCSP responder its certificates name' }),
  certificate: Type.Union([Pem('PEM'), Type.Null()]),
  chain: Type.Array(Pem('PEM'), { description: 'The certificates above this CA, issuer first' }),
  csr: Type.Union([Pem('PEM, while pending'), Type.Null()]),
  notBefore: Type.Union([Type.String(), Type.Null()]),
  notAfter: Type.Union([Type.String(), Type.Null()]),
  firstIssuedAt: Type.Union([Type.String(), Type.Null()], {
    description: 'The first certificate it signed: from then on its CRL and issuer URLs are fixed',
  }),
  createdAt: Type.String(),
  updatedAt: Type.String(),
})
nameSchema(CaSchema, 'CertificateAuthority')
export const CaListSchema = Type.Object({
  data: Type.Array(CaSchema),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
})
nameSchema(CaListSchema, 'CertificateAuthorityList')

const RoleSettingsFields = {
  allowedDomains: Type.Array(DnsName, {
    maxItems: CA_LIMITS.names,
    description: 'Domains names may be in (bare, subdomains or wildcards as allowed below)',
  }),
  allowBareDomains: Type.Boolean({ description: 'The allowed domain itself (default false)' }),
  allowSubdomains: Type.Boolean({ description: 'Names below an allowed domain (default false)' }),
  allowWildcardCertificates: Type.Boolean({ description: 'Names like *.example.com (default false)' }),
  allowIpSans: Type.Boolean({ description: 'IP address SANs (default false)' }),
  allowAnyName: Type.Boolean({ description: 'Any name, the domain list ignored (default false)' }),
  enforceHostnames: Type.Boolean({ description: 'Names must be valid hostnames (default true)' }),
  allowedKeyAlgorithms: Type.Array(Type.Enum(ROLE_KEY_ALGORITHMS), {
    maxItems: ROLE_KEY_ALGORITHMS.length,
    description: 'Leaf key algorithms (default: all)',
  }),
  keyUsage: Type.Array(Type.Enum(KEY_USAGES), { maxItems: KEY_USAGES.length }),
  extKeyUsage: Type.Array(Type.Enum(EXT_KEY_USAGES), { maxItems: EXT_KEY_USAGES.length }),
  ttlSeconds: Type.Integer({
    minimum: CA_LIMITS.minLeafSeconds,
    maximum: CA_LIMITS.maxLeafSeconds,
    description: 'Default leaf lifetime (30 days)',
  }),
  maxTtlSeconds: Type.Integer({
    minimum: CA_LIMITS.minLeafSeconds,
    maximum: CA_LIMITS.maxLeafSeconds,
    description: 'Longest leaf lifetime (90 days)',
  }),
  notAfterBehavior: Type.Enum(['error', 'truncate'], {
    description: 'A leaf that would outlive the CA: refused (default) or cut to the CA’s end',
  }),
  noStore: Type.Boolean({
    description: 'Issue without keeping the certificate (revocation by serial still works)',
  }),
}
const optionalAll = <T extends Record<string, import('typebox').TSchema>>(fields: T) =>
  Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, Type.Optional(v)])) as {
    [K in keyof T]: import('typebox').TOptional<T[K]>
  }

const RoleName = Type.String({
  minLength: 1,
  maxLength: 100,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$',
  description: 'Letters, digits, . _ -',
})

export const CreateRoleBody = Type.Object(
  { name: RoleName, ...optionalAll(RoleSettingsFields) },
  {
    additionalProperties: false,
    examples: [
      { name: 'web', allowedDomains: ['example.com'], allowSubdomains: true, maxTtlSeconds: 7_776_000 },
    ],
  },
)
export type CreateRoleBody = Static<typeof CreateRoleBody>
nameSchema(CreateRoleBody, 'CreateCertificateRole')
export const UpdateRoleBody = Type.Object(optionalAll(RoleSettingsFields), {
  additionalProperties: false,
  minProperties: 1,
  examples: [{ allowWildcardCertificates: true }],
})
export type UpdateRoleBody = Static<typeof UpdateRoleBody>
nameSchema(UpdateRoleBody, 'UpdateCertificateRole')

export const RoleSchema = Type.Object({
  name: Type.String(),
  caId: Type.String(),
  ...RoleSettingsFields,
  createdAt: Type.String(),
  updatedAt: Type.String(),
})
nameSchema(RoleSchema, 'CertificateRole')
export const RoleListSchema = Type.Object({ data: Type.Array(RoleSchema) })
nameSchema(RoleListSchema, 'CertificateRoleList')
export const RoleParams = Type.Object({ id: Uuid('CA id'), name: RoleName }, { additionalProperties: false })

export const IssueCertificateBody = Type.Object(
  {
    caId: Uuid('The issuing CA'),
    role: RoleName,
    csr: Type.Optional(
      Text(65_536, 'A PKCS#10 request (PEM): its signature proves possession of the key', 1),
    ),
    keyAlgorithm: Type.Optional(
      Type.Enum(LEAF_KEY_ALGORITHMS, {
        description: 'Without csr: the key pair the service generates (default EC-P256); ML-KEM needs this',
      }),
    ),
    commonName: Type.Optional(Printable(64, 'CN; absent: the CSR’s')),
    dnsNames: Type.Optional(Type.Array(DnsName, { maxItems: CA_LIMITS.names })),
    ipAddresses: Type.Optional(Type.Array(IpText, { maxItems: CA_LIMITS.names })),
    ttlSeconds: Type.Optional(
      Type.Integer({ minimum: CA_LIMITS.minLeafSeconds, maximum: CA_LIMITS.maxLeafSeconds }),
    ),
  },
  {
    additionalProperties: false,
    examples: [{ caId: '7d0c8d1e-9f57-4c4e-9f6a-2f3c1f0c8b11', role: 'web', dnsNames: ['api.example.com'] }],
  },
)
export type IssueCertificateBody = Static<typeof IssueCertificateBody>
nameSchema(IssueCertificateBody, 'IssueCertificate')

const CertificateStatus = Type.Enum(['valid', 'revoked', 'expired'])
export const CertificateSchema = Type.Object({
  serial: Type.String({ description: 'Hex, lower case' }),
  caId: Type.String(),
  role: Type.String(),
  commonName: Type.Union([Type.String(), Type.Null()]),
  dnsNames: Type.Array(Type.String()),
  ipAddresses: Type.Array(Type.String()),
  keyAlgorithm: Type.String(),
  notBefore: Type.String(),
  notAfter: Type.String(),
  status: CertificateStatus,
  revokedAt: Type.Union([Type.String(), Type.Null()]),
  revocationReason: Type.Union([Type.String(), Type.Null()]),
  certificate: Type.String({ description: 'PEM' }),
  createdAt: Type.String(),
})
nameSchema(CertificateSchema, 'Certificate')
export const IssuedCertificateSchema = Type.Object({
  ...CertificateSchema.properties,
  stored: Type.Boolean({ description: 'false: the role said noStore' }),
  chain: Type.Array(Type.String(), { description: 'PEM, the issuing CA first' }),
  privateKey: Type.Optional(Type.String({ description: 'PKCS#8 PEM of a generated key: shown once' })),
})
nameSchema(IssuedCertificateSchema, 'IssuedCertificate')
export const CertificateListSchema = Type.Object({
  data: Type.Array(CertificateSchema),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
})
nameSchema(CertificateListSchema, 'CertificateList')

export const ListCertificatesQuery = Type.Object(
  {
    caId: Type.Optional(Uuid('Issued by this CA')),
    status: Type.Optional(CertificateStatus),
    expiringWithinDays: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 3650, description: 'Valid and ending within this many days' }),
    ),
    ...PageQuery,
  },
  { additionalProperties: false },
)
export type ListCertificatesQuery = Static<typeof ListCertificatesQuery>

export const SerialParams = Type.Object(
  {
    serial: Type.String({
      pattern: '^[0-9A-Fa-f:]{1,59}$',
      description: 'Hex, with or without colons',
    }),
  },
  { additionalProperties: false },
)

export const RevokeBody = Type.Object(
  {
    reason: Type.Optional(Type.Enum(REVOCATION_REASONS, { default: 'unspecified' })),
    caId: Type.Optional(Uuid('Needed for a certificate the service did not store (noStore)')),
  },
  { additionalProperties: false, examples: [{ reason: 'keyCompromise' }] },
)
export type RevokeBody = Static<typeof RevokeBody>
nameSchema(RevokeBody, 'RevokeCertificate')

export const ListCasQuery = Type.Object({ ...PageQuery }, { additionalProperties: false })
export const FormatQuery = Type.Object(
  { format: Type.Optional(Type.Enum(['der', 'pem'], { default: 'der' })) },
  { additionalProperties: false },
)

export const RevocationSchema = Type.Object({
  serial: Type.String(),
  caId: Type.String(),
  revokedAt: Type.String(),
  revocationReason: Type.String(),
  stored: Type.Boolean({ description: 'false: issued under a noStore role (the CRL lists it all the same)' }),
})
nameSchema(RevocationSchema, 'CertificateRevocation')
