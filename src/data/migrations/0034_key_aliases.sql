-- Issue 35, item 5: key aliases (docs/keys.md "Key aliases"). An alias is a tenant's own name for
-- one of its keys, `alias/<name>`, usable wherever a key id is, and movable to another key of the
-- same type (AWS KMS's model). Case-sensitive and unique per tenant; several per key.
CREATE TABLE key_aliases (
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  -- The whole alias, prefix included: `alias/` then 1 to 250 of [A-Za-z0-9/_-]. `alias/kms/` is
  -- reserved for the service (refused by the service, not here: it may create such aliases).
  -- Byte order ("C"): the alias list's order and its keyset pagination do not depend on the
  -- database's collation, and the primary key's index serves both.
  alias text COLLATE "C" NOT NULL CHECK (alias ~ '^alias/[A-Za-z0-9/_-]{1,250}$'),
  key_id uuid NOT NULL REFERENCES keys (id),
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  -- The last move (created_at until the alias is moved).
  updated_at timestamptz NOT NULL,
  CONSTRAINT key_aliases_pkey PRIMARY KEY (tenant_id, alias)
);

-- A key's aliases (key views, the per-key bound, destruction), and the alias list filtered by key
-- in alias order.
CREATE INDEX key_aliases_key_idx ON key_aliases (tenant_id, key_id, alias);
