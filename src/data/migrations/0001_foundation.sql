-- Tenants, their key-encryption keys, API keys and the audit log.

CREATE TABLE tenants (
  id uuid PRIMARY KEY,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT now(),
  -- The tenant KEK, AES-256-GCM-sealed by the master key identified by kek_master_key_id.
  kek_wrapped bytea NOT NULL,
  kek_master_key_id text NOT NULL,
  kek_wrapped_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tenants_kek_master_key_id_idx ON tenants (kek_master_key_id);

CREATE TABLE api_keys (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  -- The first characters of the key after its prefix: finds the row; the secret is compared by hash.
  lookup_id text NOT NULL,
  secret_hash bytea NOT NULL,
  name text NOT NULL,
  scopes text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  created_by text NOT NULL,
  expires_at timestamptz,
  revoked_at timestamptz,
  CONSTRAINT api_keys_lookup_id_key UNIQUE (lookup_id)
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id, created_at, id);

CREATE TABLE audit_log (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- No foreign key: the audit trail outlives whatever it describes.
  tenant_id uuid NOT NULL,
  occurred_at timestamptz NOT NULL DEFAULT now(),
  actor text NOT NULL,
  action text NOT NULL,
  resource text,
  key_version integer,
  outcome text NOT NULL CHECK (outcome IN ('success', 'failure', 'denied')),
  request_id text,
  client_ip text,
  details jsonb
);
CREATE INDEX audit_log_tenant_idx ON audit_log (tenant_id, id DESC);
CREATE INDEX audit_log_tenant_action_idx ON audit_log (tenant_id, action, id DESC);
CREATE INDEX audit_log_tenant_time_idx ON audit_log (tenant_id, occurred_at DESC);
