-- The deployment's identity (docs/jobs.md, "One Redis, several deployments"): a random id made
-- once per database. With the cluster's system identifier and the database name it derives the
-- namespace of the background-job queues in Redis, so two deployments that share a Redis and
-- a KMS_REDIS_PREFIX never run each other's sweeps. One row, never changed.

CREATE TABLE deployment_identity (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  id uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO deployment_identity (id) VALUES (gen_random_uuid());
