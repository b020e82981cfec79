-- Key intelligence (issue 22): each key's last use, tag suggestions and their bulk jobs.

-- The key-use meter appends, with each audit write, the last attempt and last success of each
-- key in that write (no row lock on the hot path); the lifecycle sweep folds them into
-- key_last_use. A reader takes the latest of both.
CREATE TABLE key_use_events (
  tenant_id uuid NOT NULL,
  key_id uuid NOT NULL,
  attempted_at timestamptz NOT NULL,
  succeeded_at timestamptz
);
CREATE INDEX key_use_events_key_idx ON key_use_events (tenant_id, key_id);

CREATE TABLE key_last_use (
  tenant_id uuid NOT NULL,
  key_id uuid NOT NULL,
  last_attempt_at timestamptz NOT NULL,
  last_success_at timestamptz,
  PRIMARY KEY (tenant_id, key_id)
);

CREATE TABLE tag_suggestion_jobs (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  status text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
  -- The active keys when the job was asked for, in the order they are processed.
  key_ids uuid[] NOT NULL,
  batch_size integer NOT NULL CHECK (batch_size BETWEEN 1 AND 100),
  batches_done integer NOT NULL DEFAULT 0,
  suggestions_created integer NOT NULL DEFAULT 0,
  engine text,
  lease_until timestamptz,
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  finished_at timestamptz,
  error text
);
CREATE INDEX tag_suggestion_jobs_tenant_idx ON tag_suggestion_jobs (tenant_id, created_at DESC);
CREATE INDEX tag_suggestion_jobs_running_idx ON tag_suggestion_jobs (created_at) WHERE status = 'running';

CREATE TABLE tag_suggestions (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  key_id uuid NOT NULL REFERENCES keys (id),
  label text NOT NULL CHECK (length(label) BETWEEN 1 AND 64),
  reason text NOT NULL CHECK (length(reason) BETWEEN 1 AND 300),
  engine text NOT NULL CHECK (engine IN ('builtin', 'model')),
  status text NOT NULL CHECK (status IN ('pending', 'accepted', 'rejected')),
  job_id uuid REFERENCES tag_suggestion_jobs (id),
  created_at timestamptz NOT NULL,
  decided_at timestamptz,
  decided_by text,
  -- One suggestion per key and label, ever: a rerun (or a restarted job) adds nothing twice, and
  -- a rejected label is not suggested again.
  CONSTRAINT tag_suggestions_key_label_unique UNIQUE (tenant_id, key_id, label)
);
CREATE INDEX tag_suggestions_tenant_idx ON tag_suggestions (tenant_id, status, created_at DESC, id);
CREATE INDEX tag_suggestions_key_idx ON tag_suggestions (tenant_id, key_id, created_at DESC);
