-- Applications (issue 18, first part): a tenant's OpenID clients.

CREATE TABLE applications (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  application_type text NOT NULL
    CHECK (application_type IN ('spa', 'traditional', 'native', 'machine_to_machine')),
  -- The OAuth client_id: random, public, unique across tenants.
  client_id text NOT NULL UNIQUE,
  -- Confidential types only: the secret, AES-256-GCM-sealed under the master keyring (the
  -- provider compares it at the token endpoint); shown to the caller once, never read back by the API.
  client_secret_sealed bytea,
  client_secret_master_key_id text,
  client_secret_rotated_at timestamptz,
  redirect_uris text[] NOT NULL DEFAULT '{}',
  post_logout_redirect_uris text[] NOT NULL DEFAULT '{}',
  resources text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  updated_by text NOT NULL
);
CREATE INDEX applications_tenant_idx ON applications (tenant_id, created_at, id);
