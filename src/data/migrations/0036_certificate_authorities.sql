-- Issue 36: a key that signs for a certificate authority signs for it alone (docs/pki.md): its
-- issuer ('pki' for X.509 CAs, 'ssh' for SSH CAs); /sign and batch signing refuse it, so no one
-- can forge a certificate by signing a hand-made TBS with the CA's key. Null: an ordinary key.
ALTER TABLE keys ADD COLUMN reserved_for text CHECK (reserved_for IN ('pki', 'ssh'));

-- Issue 36: X.509 certificate authorities (docs/pki.md). A CA signs with a key of the keys domain
-- (never exported), pinned to one version; its certificate, roles, issued certificates and
-- revocations live here. The CRL is kept signed (rebuilt by the job process and on revocation).
CREATE TABLE certificate_authorities (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  name text NOT NULL,
  -- root: self-signed; intermediate: signed by another CA of the tenant, or by an outside parent
  -- (status pending, with a CSR, until its certificate is imported).
  kind text NOT NULL CHECK (kind IN ('root', 'intermediate')),
  -- revoked: its parent (of the tenant) revoked its certificate; it issues nothing more.
  status text NOT NULL CHECK (status IN ('pending', 'active', 'revoked')),
  parent_id uuid REFERENCES certificate_authorities (id),
  key_id uuid NOT NULL REFERENCES keys (id),
  key_version integer NOT NULL,
  algorithm text NOT NULL,
  -- The subject Name as DER, and as entered (the view's fields).
  subject_der bytea NOT NULL,
  subject jsonb NOT NULL,
  path_length integer,
  name_constraints jsonb,
  crl_urls text[] NOT NULL,
  issuer_urls text[] NOT NULL,
  -- The OCSP responder's URLs its certificates name (AIA ocsp).
  ocsp_urls text[] NOT NULL,
  -- The CA's own certificate (null while pending) and the chain above it, issuer first (an
  -- array of Base64 DER certificates).
  certificate bytea,
  chain jsonb NOT NULL DEFAULT '[]',
  csr bytea,
  not_before timestamptz,
  not_after timestamptz,
  -- The serial of its certificate (hex), when a CA of the tenant signed it.
  serial text,
  -- The first issuance: the URLs a certificate carries can change only before it. Set once (a
  -- counter would make every issuance of the CA wait on this row's lock).
  first_issued_at timestamptz,
  crl_number bigint NOT NULL DEFAULT 0,
  crl bytea,
  crl_built_number bigint NOT NULL DEFAULT 0,
  crl_next_update timestamptz,
  -- A revocation happened since the CRL was built: the next build is due at once.
  crl_stale boolean NOT NULL DEFAULT true,
  -- A build failed (the key revoked, the pool busy): not tried again before this time, so that CAs
  -- that cannot sign do not take every sweep's turn from the others.
  crl_retry_at timestamptz,
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL,
  CONSTRAINT certificate_authorities_name_key UNIQUE (tenant_id, name)
);

CREATE INDEX certificate_authorities_crl_due_idx ON certificate_authorities (crl_next_update)
  WHERE status = 'active';

CREATE TABLE certificate_roles (
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  ca_id uuid NOT NULL REFERENCES certificate_authorities (id) ON DELETE CASCADE,
  name text NOT NULL,
  settings jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CONSTRAINT certificate_roles_pkey PRIMARY KEY (ca_id, name)
);

-- Issued certificates, unless the role said noStore. The serial (hex) is random (159 bits).
CREATE TABLE certificates (
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  serial text NOT NULL,
  ca_id uuid NOT NULL REFERENCES certificate_authorities (id),
  role text NOT NULL,
  common_name text,
  alt_names jsonb NOT NULL,
  key_algorithm text NOT NULL,
  der bytea NOT NULL,
  not_before timestamptz NOT NULL,
  not_after timestamptz NOT NULL,
  revoked_at timestamptz,
  revocation_reason text,
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  CONSTRAINT certificates_pkey PRIMARY KEY (tenant_id, serial)
);

CREATE INDEX certificates_ca_idx ON certificates (tenant_id, ca_id, created_at DESC);
CREATE INDEX certificates_expiry_idx ON certificates (tenant_id, not_after);

-- What the CRL lists: every revocation (of stored and noStore certificates alike) until the
-- certificate's end, after which it is dropped from the CRL (RFC 5280 §3.3 allows it).
CREATE TABLE certificate_revocations (
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  ca_id uuid NOT NULL REFERENCES certificate_authorities (id),
  serial text NOT NULL,
  revoked_at timestamptz NOT NULL,
  reason text NOT NULL,
  -- The certificate's notAfter; for a certificate not stored, the longest a leaf could live.
  listed_until timestamptz NOT NULL,
  CONSTRAINT certificate_revocations_pkey PRIMARY KEY (ca_id, serial)
);
