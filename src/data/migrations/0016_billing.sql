-- Billing (issue 20, first part): plans, each tenant's subscription, and the usage meter.

-- Prices in minor units (cents): money is never a binary float here.
CREATE TABLE billing_plans (
  id text PRIMARY KEY CHECK (id ~ '^[a-z][a-z0-9_-]{0,31}$'),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  monthly_price_minor bigint NOT NULL CHECK (monthly_price_minor >= 0),
  currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
  -- {operationsPerMonth, keys, secrets, endUsers}: a number, or null for no limit.
  quotas jsonb NOT NULL,
  position integer NOT NULL
);
INSERT INTO billing_plans (id, name, monthly_price_minor, currency, quotas, position) VALUES
  ('free', 'Free', 0, 'EUR', '{"operationsPerMonth": 10000, "keys": 25, "secrets": 100, "endUsers": 100}', 1),
  ('pro', 'Pro', 4900, 'EUR', '{"operationsPerMonth": 1000000, "keys": 1000, "secrets": 10000, "endUsers": 10000}', 2),
  ('enterprise', 'Enterprise', 49900, 'EUR', '{"operationsPerMonth": null, "keys": null, "secrets": null, "endUsers": null}', 3);

-- A tenant without a row is on the Free plan.
CREATE TABLE subscriptions (
  tenant_id uuid PRIMARY KEY REFERENCES tenants (id),
  plan_id text NOT NULL REFERENCES billing_plans (id),
  status text NOT NULL CHECK (status IN ('active', 'past_due', 'canceled')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  updated_by text NOT NULL
);

-- The usage meter: successful cryptographic operations per tenant, month (UTC) and kind, appended
-- by the statement that writes their audit records (src/audit, src/billing/usage-meter.ts): one
-- row per tenant and kind of each audit write, no upsert, so concurrent writes never wait on a
-- row lock. The billing sweep folds a month's rows into one per kind; a reading sums the rows.
-- No foreign key: the audit write is the hot path.
CREATE TABLE usage_counters (
  tenant_id uuid NOT NULL,
  period text NOT NULL CHECK (period ~ '^[0-9]{4}-[0-9]{2}$'),
  kind text NOT NULL CHECK (length(kind) <= 64),
  count bigint NOT NULL CHECK (count > 0)
);
CREATE INDEX usage_counters_tenant_period_idx ON usage_counters (tenant_id, period);
