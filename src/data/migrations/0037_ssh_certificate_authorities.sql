-- SSH certificate authorities (docs/ssh.md): a user CA and a host CA per tenant, each signing with
-- a key of the keys domain (a non-exportable Signing key, one pinned version), and the OpenSSH
-- certificates they issued, kept for listing, revocation and the KRL.
CREATE TABLE ssh_certificate_authorities (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  ca_type text NOT NULL CHECK (ca_type IN ('user', 'host')),
  key_id uuid NOT NULL REFERENCES keys (id),
  key_version integer NOT NULL CHECK (key_version >= 1),
  -- The key's algorithm (src/ssh/ssh-schemas.ts SSH_CA_ALGORITHMS).
  algorithm text NOT NULL,
  -- The key version's public key in SSH wire form (RFC 4253 6.6): what the certificates' signature
  -- key field, the public key line and the KRL carry; read by the public routes without the key.
  public_key bytea NOT NULL,
  default_validity_seconds integer NOT NULL CHECK (default_validity_seconds >= 60),
  max_validity_seconds integer NOT NULL CHECK (max_validity_seconds >= default_validity_seconds),
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL,
  updated_by text NOT NULL,
  CONSTRAINT ssh_certificate_authorities_tenant_type_key UNIQUE (tenant_id, ca_type)
);

CREATE TABLE ssh_certificates (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  ca_id uuid NOT NULL REFERENCES ssh_certificate_authorities (id),
  -- uint64, random and non-zero (a KRL cannot revoke serial 0).
  serial numeric(20, 0) NOT NULL CHECK (serial > 0 AND serial < 18446744073709551616),
  cert_type text NOT NULL CHECK (cert_type IN ('user', 'host')),
  key_identity text NOT NULL CHECK (length(key_identity) BETWEEN 1 AND 255),
  principals text[] NOT NULL CHECK (cardinality(principals) BETWEEN 1 AND 256),
  valid_after timestamptz NOT NULL,
  valid_before timestamptz NOT NULL CHECK (valid_before > valid_after),
  public_key_type text NOT NULL,
  public_key_fingerprint text NOT NULL,
  -- {forceCommand?, sourceAddress?}
  critical_options jsonb NOT NULL DEFAULT '{}',
  extensions text[] NOT NULL DEFAULT '{}',
  -- The certificate's `-cert.pub` line: public, answered as is.
  certificate text NOT NULL,
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  revoked_at timestamptz,
  revoked_by text,
  revocation_reason text CHECK (length(revocation_reason) <= 500),
  CONSTRAINT ssh_certificates_ca_serial_key UNIQUE (ca_id, serial)
);
-- The list, newest first, of a tenant's certificates.
CREATE INDEX ssh_certificates_list_idx ON ssh_certificates (tenant_id, created_at DESC, id DESC);
-- The KRL: the revoked certificates of a CA that have not expired.
CREATE INDEX ssh_certificates_revoked_idx ON ssh_certificates (ca_id, valid_before) WHERE revoked_at IS NOT NULL;
