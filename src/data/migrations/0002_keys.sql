-- Trigram indexes make the key list's substring search an index lookup, not a table scan.
-- pg_trgm is a trusted extension (PostgreSQL 13+): the database owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- Tenant keys and their versions (spec 2.2, 3). States are derived at read time from the
-- timestamps below, so a key past expires_at or scheduled_deletion_date is Expired or
-- Destroyed even if no background job has run.

CREATE TABLE keys (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  description text NOT NULL DEFAULT '',
  key_type text NOT NULL CHECK (key_type IN ('Encryption', 'Signing', 'HMAC')),
  algorithm text NOT NULL,
  origin text NOT NULL CHECK (origin IN ('Generated', 'Imported')),
  is_default boolean NOT NULL DEFAULT false,
  is_favorite boolean NOT NULL DEFAULT false,
  labels text[] NOT NULL DEFAULT '{}',
  current_version integer NOT NULL DEFAULT 1 CHECK (current_version >= 1),
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL,
  last_rotated_at timestamptz,
  expires_at timestamptz,
  revoked_at timestamptz,
  scheduled_deletion_date timestamptz,
  -- Set when the material is erased; the row stays for audit.
  destroyed_at timestamptz,
  CONSTRAINT keys_tenant_name_key UNIQUE (tenant_id, name)
);

-- The default key rule, enforced by the database: at most one default per type per tenant.
CREATE UNIQUE INDEX keys_one_default_per_type ON keys (tenant_id, key_type) WHERE is_default;

-- Key list orderings. Favourites come first, so each list is read as two segments
-- (is_favorite = true, then false), each in index order: every page is a short index range.
CREATE INDEX keys_list_created_idx ON keys (tenant_id, is_favorite, created_at, id);
CREATE INDEX keys_list_name_idx ON keys (tenant_id, is_favorite, name, id);
CREATE INDEX keys_list_algorithm_idx ON keys (tenant_id, is_favorite, algorithm, id);
CREATE INDEX keys_list_type_idx ON keys (tenant_id, is_favorite, key_type, id);
CREATE INDEX keys_list_version_idx ON keys (tenant_id, is_favorite, current_version, id);
CREATE INDEX keys_labels_idx ON keys USING gin (labels);
CREATE INDEX keys_name_search_idx ON keys USING gin (name gin_trgm_ops);
CREATE INDEX keys_description_search_idx ON keys USING gin (description gin_trgm_ops);
-- The list's expiry alert counts live keys with an expiry: an index-only scan of this index.
CREATE INDEX keys_expiring_idx ON keys (tenant_id, expires_at)
  WHERE expires_at IS NOT NULL AND revoked_at IS NULL AND scheduled_deletion_date IS NULL AND destroyed_at IS NULL;
-- The next deletion date, per tenant and overall: one index entry tells whether anything is due.
CREATE INDEX keys_tenant_deletion_idx ON keys (tenant_id, scheduled_deletion_date)
  WHERE scheduled_deletion_date IS NOT NULL AND destroyed_at IS NULL;
CREATE INDEX keys_deletion_idx ON keys (scheduled_deletion_date)
  WHERE scheduled_deletion_date IS NOT NULL AND destroyed_at IS NULL;

CREATE TABLE key_versions (
  key_id uuid NOT NULL REFERENCES keys (id),
  version integer NOT NULL CHECK (version >= 1),
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  created_at timestamptz NOT NULL,
  -- SPKI DER; NULL for HMAC keys and once destroyed.
  public_key bytea,
  -- PKCS#8 DER or the HMAC secret, AES-256-GCM-sealed by the tenant KEK; NULL once destroyed.
  sealed_material bytea,
  destroyed_at timestamptz,
  PRIMARY KEY (key_id, version)
);
