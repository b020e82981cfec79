-- Issue 15, defects 4 and 5.
--
-- API-key lineage: the key that created each API key. A child never outlives its parent and
-- revoking a key revokes what it minted, transitively. Keys made by the CLI or at bootstrap
-- (tenant creation) have none. Existing keys get their parent from created_by ("apikey:<id>"),
-- which has named the creating key since the first migration.
ALTER TABLE api_keys ADD COLUMN parent_id uuid REFERENCES api_keys (id);
UPDATE api_keys AS child SET parent_id = parent.id
  FROM api_keys AS parent
  WHERE child.created_by = 'apikey:' || parent.id::text AND parent.tenant_id = child.tenant_id;
CREATE INDEX api_keys_parent_idx ON api_keys (parent_id) WHERE parent_id IS NOT NULL;

-- Private-key export is off unless the key was created or imported with exportable = true;
-- the flag is fixed at creation. Existing keys are not exportable: the safe default (until now
-- keys:write alone could export any key), and the flag cannot be turned on later.
ALTER TABLE keys ADD COLUMN exportable boolean NOT NULL DEFAULT false;

-- keys:export is a new scope. The full-scope keys made at tenant creation (bootstrap, CLI) get
-- it, as new ones do: a key with no parent holding every scope that existed before this
-- migration. Other keys do not: export is never implied by keys:write.
UPDATE api_keys SET scopes = array_append(scopes, 'keys:export')
  WHERE parent_id IS NULL AND NOT ('keys:export' = ANY (scopes))
    AND scopes @> ARRAY['secrets:read', 'secrets:write', 'keys:read', 'keys:write', 'encryption:write',
      'encrypt:invoke', 'ssh:read', 'ssh:write', 'certificates:read', 'certificates:write',
      'applications:read', 'applications:write', 'endusers:read', 'endusers:write', 'roles:read',
      'roles:write', 'audit:read', 'billing:read', 'apikeys:read', 'apikeys:write']::text[];
