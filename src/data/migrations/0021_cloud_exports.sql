-- Cloud KMS export (issue 21): a tenant's connections to cloud KMSs (credentials sealed by the
-- tenant KEK, never returned) and its keys' exports to them, each with its sync state. The
-- export row is the outbox of its syncs: a rotation marks it pending in the rotation's
-- transaction, and the job process pushes, retries with backoff and records the outcome.
CREATE TABLE cloud_connections (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  provider text NOT NULL CHECK (provider IN ('aws', 'azure', 'gcp', 'scaleway')),
  -- The provider's non-secret fields (region, ids, endpoint, an extra CA), as validated.
  settings jsonb NOT NULL,
  credentials_sealed bytea NOT NULL,
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL,
  credentials_updated_at timestamptz NOT NULL,
  CONSTRAINT cloud_connections_name_unique UNIQUE (tenant_id, name)
);

CREATE TABLE cloud_exports (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  key_id uuid NOT NULL,
  connection_id uuid NOT NULL REFERENCES cloud_connections (id),
  provider text NOT NULL,
  -- Where at the provider (region and alias, vault and key name, key ring and key, ...).
  target jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  -- The key version that should be at the cloud, and where the sync stands.
  desired_version integer NOT NULL CHECK (desired_version >= 1),
  sync_status text NOT NULL CHECK (sync_status IN ('pending', 'synced', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  -- A job process working on it holds it until then (another one leaves it alone).
  lease_until timestamptz,
  last_sync_at timestamptz,
  last_sync_version integer,
  last_sync_error_code text,
  last_sync_error text CHECK (last_sync_error IS NULL OR length(last_sync_error) <= 500),
  last_attempt_at timestamptz,
  -- What the last successful push left at the cloud (the provider's key id, and its own state).
  provider_key_id text,
  provider_state jsonb,
  FOREIGN KEY (key_id) REFERENCES keys (id)
);
CREATE INDEX cloud_exports_key_idx ON cloud_exports (tenant_id, key_id, created_at);
CREATE INDEX cloud_exports_connection_idx ON cloud_exports (connection_id);
CREATE INDEX cloud_exports_due_idx ON cloud_exports (next_attempt_at) WHERE sync_status = 'pending';
