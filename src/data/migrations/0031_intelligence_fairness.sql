-- Key intelligence, issue 31: tag-suggestion jobs claimed fairly across tenants and failed after
-- bounded retries (defect 5); the insights report computed in SQL from a read model (defect 6).

-- Failed attempts at the job's current batch (back to 0 when a batch commits). At the bound the
-- job is `failed` with its reason in `error` (both columns exist since 0022) instead of being
-- claimed again forever.
ALTER TABLE tag_suggestion_jobs ADD COLUMN batch_failures integer NOT NULL DEFAULT 0;

-- Whose turn it is: each claim stamps the tenant with the next number of the sequence, and a
-- worker claims a job of the tenant served longest ago (never served first). One row per tenant
-- that ever ran a job; the claim reads it for the tenants with running jobs only.
CREATE SEQUENCE tag_suggestion_turn_seq;
CREATE TABLE tag_suggestion_turns (
  tenant_id uuid PRIMARY KEY REFERENCES tenants (id),
  served bigint NOT NULL
);

-- The insights read model (docs/insights.md "How the report is computed"): the facts of a key
-- the findings need, and whether it has a rotation policy and since when it is paused. The
-- intelligence store reads keys and rotation policies through this view only; it is the
-- contract with the keys and rotation modules (PostgreSQL refuses to drop a column it names, so
-- a change to those tables that breaks it has to say so in its migration). A key's state is not
-- a column: it depends on the time of the report (the service's clock), so the store derives it
-- from these timestamps exactly as keyState() does (test/insights.test.ts compares the two).
CREATE VIEW intelligence_key_facts AS
SELECT
  k.tenant_id,
  k.id,
  k.name,
  k.description,
  k.key_type,
  k.algorithm,
  k.labels,
  k.created_at,
  k.expires_at,
  k.revoked_at,
  k.scheduled_deletion_date,
  k.destroyed_at,
  p.key_id IS NOT NULL AS has_rotation_policy,
  p.paused_at AS rotation_paused_at
FROM keys k
LEFT JOIN rotation_policies p ON p.key_id = k.id AND p.tenant_id = k.tenant_id;
