-- Rotation policies (spec 2.3), time-driven key transitions materialised by jobs, and signed
-- webhook deliveries. PostgreSQL holds all of this state; BullMQ only decides when work runs,
-- so losing Redis loses no rotation, transition or delivery.

-- The schedule lives on the key, so the key record shows it and the due-rotation sweep is one
-- index scan. NULL: no policy, or the policy is paused.
ALTER TABLE keys ADD COLUMN next_rotation_at timestamptz;
-- Set once by the lifecycle job when a key is first seen past expires_at (the state itself is
-- derived from expires_at at every read; this records that the transition was acted on).
ALTER TABLE keys ADD COLUMN expired_at timestamptz;

CREATE INDEX keys_rotation_due_idx ON keys (next_rotation_at) WHERE next_rotation_at IS NOT NULL;
CREATE INDEX keys_expiry_due_idx ON keys (expires_at)
  WHERE expires_at IS NOT NULL AND expired_at IS NULL AND destroyed_at IS NULL;

CREATE TABLE rotation_policies (
  key_id uuid PRIMARY KEY REFERENCES keys (id),
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  frequency text NOT NULL CHECK (frequency IN ('Daily', 'Weekly', 'Monthly', 'Quarterly', 'Yearly')),
  webhook_url text,
  -- Kept while paused, so insights can flag policies paused for too long.
  paused_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX rotation_policies_tenant_idx ON rotation_policies (tenant_id);

-- One secret per tenant signs its webhook deliveries (HMAC-SHA256), sealed by the tenant KEK.
CREATE TABLE webhook_secrets (
  tenant_id uuid PRIMARY KEY REFERENCES tenants (id),
  sealed_secret bytea NOT NULL,
  created_at timestamptz NOT NULL
);

-- The outbox: a delivery row is written in the same transaction as the event it reports, then
-- a job sends it; attempts are appended as they happen.
CREATE TABLE webhook_deliveries (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  event_id uuid NOT NULL,
  event_type text NOT NULL,
  url text NOT NULL,
  payload text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  -- [{attempt, at, statusCode, error, durationMs, responseExcerpt}]
  attempts jsonb NOT NULL DEFAULT '[]',
  -- The attempt a worker has claimed (0: none yet). A job acts only on the attempt after it, so
  -- a job re-sent after a Redis restart never repeats an attempt.
  claimed_attempt integer NOT NULL DEFAULT 0,
  -- When the next attempt is due (NULL once finished); the outbox sweep re-sends lost jobs.
  next_attempt_at timestamptz,
  created_at timestamptz NOT NULL,
  completed_at timestamptz
);
CREATE INDEX webhook_deliveries_tenant_idx ON webhook_deliveries (tenant_id, created_at DESC, id);
CREATE INDEX webhook_deliveries_pending_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
