import { type Static, Type } from 'typebox'
import { PageQuery, Printable, Text, Timestamp, Uuid } from '../http/http-schemas.ts'
import { PATTERN_MESSAGE } from '../http/validation.ts'
import { CERT_TYPES, PERMIT_EXTENSIONS } from './ssh-certificate.ts'
import { MIN_VALIDITY_SECONDS, PRINCIPAL_LIMITS, VALIDITY_LIMITS } from './ssh-policy.ts'
import { MAX_PUBLIC_KEY_LINE } from './ssh-wire.ts'

/**
 * The algorithms of a CA's key: those OpenSSH certificates can be signed with (no post-quantum
 * signature has an OpenSSH certificate type). RSA signs with rsa-sha2-256.
 */
export const SSH_CA_ALGORITHMS = [
  'Ed25519',
  'EC-P256',
  'EC-P384',
  'EC-P521',
  'RSA-2048',
  'RSA-3072',
  'RSA-4096',
] as const
export type SshCaAlgorithm = (typeof SSH_CA_ALGORITHMS)[number]

const CertTypeSchema = Type.Enum(CERT_TYPES, {
  description: 'user: certificates for logging in to hosts; host: certificates hosts present to clients',
})

const ValiditySeconds = (description: string) =>
  Type.Integer({ minimum: MIN_VALIDITY_SECONDS, maximum: VALIDITY_LIMITS.host.max, description })

const EXAMPLE_PUBLIC_KEY =
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPv0qvg/4Y5FP+RupvaGoibT0Ygx+B1iD/hO8eYwpGiu alice@laptop'

export const CreateSshCaBody = Type.Object(
  {
    type: CertTypeSchema,
    algorithm: Type.Optional(
      Type.Enum(SSH_CA_ALGORITHMS, {
        description: 'The algorithm of the key generated for the CA (default Ed25519); not with keyId',
      }),
    ),
    keyId: Type.Optional(
      Uuid(
        'An existing Signing key of the tenant to sign with instead of a new one: not exportable, of one of the CA algorithms; its current version is pinned',
      ),
    ),
    defaultValiditySeconds: Type.Optional(
      ValiditySeconds(
        'Validity of a certificate whose request names none (user 57600, host 2592000 by default)',
      ),
    ),
    maxValiditySeconds: Type.Optional(
      ValiditySeconds(
        'The longest validity a request may ask for (user at most and by default 86400, host 6048000)',
      ),
    ),
  },
  {
    $id: 'CreateSshCaRequest',
    additionalProperties: false,
    examples: [{ type: 'user', algorithm: 'Ed25519' }],
  },
)
export type CreateSshCaBody = Static<typeof CreateSshCaBody>

export const UpdateSshCaBody = Type.Object(
  {
    defaultValiditySeconds: Type.Optional(
      ValiditySeconds('Validity of a certificate whose request names none'),
    ),
    maxValiditySeconds: Type.Optional(ValiditySeconds('The longest validity a request may ask for')),
  },
  {
    $id: 'UpdateSshCaRequest',
    additionalProperties: false,
    minProperties: 1,
    examples: [{ defaultValiditySeconds: 28_800, maxValiditySeconds: 43_200 }],
  },
)
export type UpdateSshCaBody = Static<typeof UpdateSshCaBody>

export const SshCaSchema = Type.Object(
  {
    id: Uuid('CA id: the public key and KRL URLs name it'),
    type: CertTypeSchema,
    keyId: Uuid('The tenant key the CA signs with'),
    keyVersion: Type.Integer({ description: 'The pinned version of that key' }),
    algorithm: Type.Enum(SSH_CA_ALGORITHMS),
    signatureAlgorithm: Type.String({
      description: 'ssh-ed25519, ecdsa-sha2-nistp256/384/521 or rsa-sha2-256',
    }),
    publicKey: Type.String({
      description: 'The CA key as one OpenSSH line (TrustedUserCAKeys, ssh-keygen -Q -s)',
    }),
    fingerprint: Type.String({ description: 'SHA256 fingerprint, as ssh-keygen -l prints it' }),
    authorizedKeysLine: Type.Union([Type.String(), Type.Null()], {
      description: 'User CA: `cert-authority <key>` for a user’s authorized_keys; null for a host CA',
    }),
    knownHostsLine: Type.Union([Type.String(), Type.Null()], {
      description: 'Host CA: `@cert-authority * <key>` for known_hosts; null for a user CA',
    }),
    defaultValiditySeconds: Type.Integer(),
    maxValiditySeconds: Type.Integer(),
    publicKeyUrl: Type.String({ description: 'Path of the public key as text/plain (no credential)' }),
    krlUrl: Type.String({ description: 'Path of the KRL for sshd’s RevokedKeys (no credential)' }),
    createdAt: Timestamp('Creation time'),
    createdBy: Type.String(),
    updatedAt: Timestamp('Last change of the settings'),
    updatedBy: Type.String(),
  },
  { $id: 'SshCaView', title: 'SshCa' },
)

export const SshCaListSchema = Type.Object(
  { data: Type.Array(SshCaSchema, { description: 'The tenant’s user and host CAs (at most one of each)' }) },
  { $id: 'SshCaList' },
)

const Principal = Type.String({
  minLength: 1,
  maxLength: PRINCIPAL_LIMITS.chars,
  pattern: '^[^,\\s\\u0000-\\u001f\\u007f\\ud800-\\udfff]+$',
  [PATTERN_MESSAGE]: 'must have no commas, whitespace or control characters',
  description: 'A user name (user certificate) or host name (host certificate)',
})

const CriticalOptionsInput = Type.Object(
  {
    forceCommand: Type.Optional(Printable(4096, 'force-command: the only command the certificate runs')),
    sourceAddress: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 4096,
        pattern: '^[0-9A-Fa-f.:/,]+$',
        [PATTERN_MESSAGE]: 'must be comma-separated CIDR blocks such as 10.0.0.0/8,2001:db8::/32',
        description: 'source-address: comma-separated CIDR blocks the client must connect from',
      }),
    ),
  },
  { additionalProperties: false, description: 'User certificates only' },
)

export const SignSshCertificateBody = Type.Object(
  {
    caId: Uuid('The CA that signs: its type is the certificate’s'),
    publicKey: Text(
      MAX_PUBLIC_KEY_LINE,
      'The key to certify as an OpenSSH line (the .pub file): ssh-ed25519, ecdsa-sha2-nistp256/384/521, or ssh-rsa of 2048 bits or more',
      1,
    ),
    principals: Type.Array(Principal, {
      maxItems: PRINCIPAL_LIMITS.items,
      description: 'At least one: the users (or host names) the certificate is valid for',
    }),
    keyId: Type.Optional(
      Printable(
        255,
        'The certificate’s key ID, which sshd logs (default: the certificate’s id in the service)',
      ),
    ),
    validitySeconds: Type.Optional(
      ValiditySeconds(
        'From now (the certificate starts 5 minutes earlier); default and maximum are the CA’s',
      ),
    ),
    criticalOptions: Type.Optional(CriticalOptionsInput),
    extensions: Type.Optional(
      Type.Array(Type.Enum(PERMIT_EXTENSIONS), {
        maxItems: PERMIT_EXTENSIONS.length,
        uniqueItems: true,
        description: 'User certificates only; default [permit-pty]; [] for none',
      }),
    ),
  },
  {
    $id: 'SignSshCertificateRequest',
    additionalProperties: false,
    examples: [
      {
        caId: '8a7c3f52-1f0e-4a57-9b4e-2f1d6c9e0b31',
        publicKey: EXAMPLE_PUBLIC_KEY,
        principals: ['alice'],
        validitySeconds: 28_800,
        extensions: ['permit-pty', 'permit-agent-forwarding'],
      },
    ],
  },
)
export type SignSshCertificateBody = Static<typeof SignSshCertificateBody>

export const SshCertificateSchema = Type.Object(
  {
    id: Uuid('Certificate id'),
    caId: Uuid('The CA that signed it'),
    type: CertTypeSchema,
    serial: Type.String({ description: 'The 64-bit serial, in decimal (as ssh-keygen -L prints it)' }),
    keyId: Type.String({ description: 'The certificate’s key ID' }),
    principals: Type.Array(Type.String()),
    validAfter: Timestamp('Start of validity'),
    validBefore: Timestamp('End of validity'),
    publicKeyType: Type.String({ description: 'Type of the certified key, e.g. ssh-ed25519' }),
    publicKeyFingerprint: Type.String({ description: 'SHA256 fingerprint of the certified key' }),
    criticalOptions: Type.Object({
      forceCommand: Type.Optional(Type.String()),
      sourceAddress: Type.Optional(Type.String()),
    }),
    extensions: Type.Array(Type.String()),
    certificate: Type.String({ description: 'The certificate as one line: save it as <key>-cert.pub' }),
    status: Type.Enum(['valid', 'expired', 'revoked'] as const),
    revokedAt: Type.Union([Timestamp('Revocation time'), Type.Null()]),
    revocationReason: Type.Union([Type.String(), Type.Null()]),
    createdAt: Timestamp('Issue time'),
    createdBy: Type.String(),
  },
  { $id: 'SshCertificateView', title: 'SshCertificate' },
)

export const SshCertificateListSchema = Type.Object(
  {
    data: Type.Array(SshCertificateSchema),
    total: Type.Integer(),
    limit: Type.Integer(),
    offset: Type.Integer(),
  },
  { $id: 'SshCertificateList' },
)

export const ListSshCertificatesQuery = Type.Object(
  {
    caType: Type.Optional(CertTypeSchema),
    revoked: Type.Optional(
      Type.Boolean({ description: 'Only revoked (true) or only unrevoked (false) certificates' }),
    ),
    expiringWithinHours: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: VALIDITY_LIMITS.host.max / 3600,
        description: 'Only certificates valid now, not revoked, whose validity ends within this many hours',
      }),
    ),
    ...PageQuery,
  },
  { additionalProperties: false },
)
export type ListSshCertificatesQuery = Static<typeof ListSshCertificatesQuery>

export const RevokeSshCertificateBody = Type.Object(
  { reason: Type.Optional(Printable(500, 'Why (kept with the certificate and in no KRL)')) },
  { $id: 'RevokeSshCertificateRequest', additionalProperties: false, examples: [{ reason: 'laptop lost' }] },
)
export type RevokeSshCertificateBody = Static<typeof RevokeSshCertificateBody>
