-- Secrets storage (spec 2.5, 4.3): folders, secrets and their value versions. Everything
-- sensitive (values, notes, sensitive custom-field values, TOTP seeds) is sealed: each secret
-- has its own data key, sealed by the tenant KEK; the fields are sealed by that data key with
-- an AAD naming tenant, secret, field (and version), so no blob opens anywhere else.

CREATE TABLE secret_folders (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  parent_id uuid REFERENCES secret_folders (id),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL,
  updated_by text NOT NULL,
  CHECK (parent_id IS DISTINCT FROM id)
);
-- Sibling folders have distinct names; top-level folders (no parent) too.
CREATE UNIQUE INDEX secret_folders_sibling_name_idx
  ON secret_folders (tenant_id, parent_id, name) NULLS NOT DISTINCT;
CREATE INDEX secret_folders_parent_idx ON secret_folders (parent_id);

CREATE TABLE secrets (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  folder_id uuid REFERENCES secret_folders (id),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  description text NOT NULL DEFAULT '',
  labels text[] NOT NULL DEFAULT '{}',
  -- Names, types and sensitivity of every custom field; values of the non-sensitive ones only.
  custom_fields jsonb NOT NULL DEFAULT '[]',
  -- The secret's data key, sealed by the tenant KEK.
  sealed_dek bytea NOT NULL,
  sealed_notes bytea,
  -- Values of the sensitive custom fields, as one sealed JSON document.
  sealed_custom_values bytea,
  sealed_totp bytea,
  current_version integer NOT NULL CHECK (current_version >= 1),
  expires_at timestamptz,
  is_active boolean NOT NULL DEFAULT true,
  is_favorite boolean NOT NULL DEFAULT false,
  is_travel_safe boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL,
  updated_by text NOT NULL,
  -- Soft deletion: restorable until purged, 30 days later.
  deleted_at timestamptz,
  deleted_by text
);
-- Names are unique within a folder among secrets that are not deleted.
CREATE UNIQUE INDEX secrets_folder_name_idx
  ON secrets (tenant_id, folder_id, name) NULLS NOT DISTINCT WHERE deleted_at IS NULL;
CREATE INDEX secrets_list_idx ON secrets (tenant_id, name, id) WHERE deleted_at IS NULL;
CREATE INDEX secrets_folder_idx ON secrets (folder_id) WHERE folder_id IS NOT NULL;
CREATE INDEX secrets_labels_idx ON secrets USING gin (labels);
CREATE INDEX secrets_name_search_idx ON secrets USING gin (name gin_trgm_ops);
CREATE INDEX secrets_purge_due_idx ON secrets (deleted_at) WHERE deleted_at IS NOT NULL;

CREATE TABLE secret_versions (
  secret_id uuid NOT NULL REFERENCES secrets (id) ON DELETE CASCADE,
  version integer NOT NULL CHECK (version >= 1),
  sealed_value bytea NOT NULL,
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  PRIMARY KEY (secret_id, version)
);
