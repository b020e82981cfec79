-- Tenant names are unique, compared case-insensitively ("Acme" and "acme" are one name), so an
-- operator can tell tenants apart by name.
--
-- Existing duplicates: the oldest tenant of each name keeps it; each later one is renamed to
-- "<name>-2", "<name>-3", ... (the first suffix free in any case), in creation order, and the
-- rename is audited under that tenant (action tenants.rename, actor "migration").
DO $$
DECLARE
  dup record;
  candidate text;
  n integer;
BEGIN
  FOR dup IN
    SELECT id, name FROM (
      SELECT id, name, row_number() OVER (PARTITION BY lower(name) ORDER BY created_at, id) AS rank
      FROM tenants
    ) ranked
    WHERE rank > 1
    ORDER BY lower(name), rank
  LOOP
    n := 2;
    LOOP
      -- Names are at most 200 characters: shorten the base rather than exceed it.
      candidate := left(dup.name, 200 - length('-' || n)) || '-' || n;
      EXIT WHEN NOT EXISTS (SELECT 1 FROM tenants WHERE lower(name) = lower(candidate));
      n := n + 1;
    END LOOP;
    UPDATE tenants SET name = candidate WHERE id = dup.id;
    INSERT INTO audit_log (tenant_id, actor, action, resource, outcome, details)
    VALUES (dup.id, 'migration', 'tenants.rename', 'tenant:' || dup.id, 'success',
            jsonb_build_object('from', dup.name, 'to', candidate, 'reason', 'tenant names became unique'));
  END LOOP;
END
$$;

CREATE UNIQUE INDEX tenants_name_unique_idx ON tenants (lower(name));
