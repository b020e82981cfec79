-- Invoices (issue 20): issued monthly in arrears for the month just ended, one per tenant and
-- month (the unique key makes a second run of the job, or a second worker, issue nothing more).
CREATE TABLE invoices (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  period text NOT NULL CHECK (period ~ '^[0-9]{4}-[0-9]{2}$'),
  plan_id text NOT NULL REFERENCES billing_plans (id),
  amount_minor bigint NOT NULL CHECK (amount_minor >= 0),
  currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
  status text NOT NULL CHECK (status IN ('open', 'paid', 'void')),
  issued_at timestamptz NOT NULL,
  paid_at timestamptz,
  -- 'cli', or 'stripe:<event id>'.
  paid_by text,
  CONSTRAINT invoices_tenant_period_unique UNIQUE (tenant_id, period)
);
CREATE INDEX invoices_tenant_idx ON invoices (tenant_id, period DESC);

-- Payment-provider webhook events already handled: a redelivered event changes nothing.
CREATE TABLE payment_events (
  provider text NOT NULL,
  event_id text NOT NULL CHECK (length(event_id) <= 255),
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (provider, event_id)
);
