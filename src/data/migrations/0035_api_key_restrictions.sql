-- Issue 35, item 6: narrower API keys, and when each API key was last used.
--
-- An API key may be restricted to a list of keys (key ids, lower case, or aliases `alias/<name>`)
-- and to cryptographic operations (src/auth/key-restriction.ts KEY_OPERATIONS). NULL: no
-- restriction of that kind (every key of the tenant, every operation the scopes allow). Fixed at
-- creation, like the scopes; a key minted by a restricted key is restricted at least as much.
ALTER TABLE api_keys
  ADD COLUMN restricted_keys text[],
  ADD COLUMN restricted_operations text[],
  ADD CONSTRAINT api_keys_restricted_keys_bounds
    CHECK (restricted_keys IS NULL OR cardinality(restricted_keys) BETWEEN 1 AND 100),
  ADD CONSTRAINT api_keys_restricted_operations_bounds
    CHECK (restricted_operations IS NULL OR cardinality(restricted_operations) BETWEEN 1 AND 64);

-- The latest audit record whose actor is the key (`apikey:<id>`), folded from the audit feed by
-- `api-key-last-use-sweep` (no write per request); a reader adds the records not folded yet.
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;

-- The consumer starts at the beginning: its sweep folds the records written before this release
-- too, in chunks, so keys used before the upgrade show when.
INSERT INTO audit_feed_cursors (consumer) VALUES ('apikeys.last_use') ON CONFLICT (consumer) DO NOTHING;
