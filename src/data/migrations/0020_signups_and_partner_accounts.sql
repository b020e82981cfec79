-- Self-service sign-up (issue 20): a tenant or a partner asks with an e-mail address, and nothing
-- is created until the address is proven by the link sent to it. The row is the outbox of that
-- e-mail (as invitations are) and records what the confirmation created.
CREATE TABLE signups (
  id uuid PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('tenant', 'partner')),
  email text NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
  email_normalized text NOT NULL,
  organization_name text NOT NULL CHECK (length(organization_name) BETWEEN 1 AND 200),
  -- A tenant's sign-up through a partner's link (?ref=): checked when asked, attributed when confirmed.
  referral_code text CHECK (referral_code ~ '^[A-Z0-9]{8,32}$'),
  token_hash bytea NOT NULL UNIQUE,
  link_sealed bytea,
  link_master_key_id text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  consumed_at timestamptz,
  email_dispatch_status text NOT NULL CHECK (email_dispatch_status IN ('queued', 'sent', 'failed')),
  dispatch_error text,
  dispatched_at timestamptz,
  tenant_id uuid REFERENCES tenants (id),
  partner_id uuid REFERENCES partners (id),
  CHECK (kind <> 'tenant' OR partner_id IS NULL),
  CHECK (kind <> 'partner' OR (tenant_id IS NULL AND referral_code IS NULL))
);
CREATE INDEX signups_email_idx ON signups (email_normalized, created_at DESC);
CREATE INDEX signups_queued_idx ON signups (created_at) WHERE email_dispatch_status = 'queued';

-- Partners who signed up wait for an operator (pending), who approves (active) or rejects them.
ALTER TABLE partners DROP CONSTRAINT partners_status_check;
ALTER TABLE partners ADD CONSTRAINT partners_status_check
  CHECK (status IN ('pending', 'active', 'suspended', 'rejected'));
-- The person who signs in to the partner portal: an account of the partners' own realm.
ALTER TABLE accounts DROP CONSTRAINT accounts_realm_check;
ALTER TABLE accounts ADD CONSTRAINT accounts_realm_check
  CHECK (realm IN ('team', 'partners') OR realm LIKE 'tenant:%');
ALTER TABLE partners ADD COLUMN account_id uuid UNIQUE REFERENCES accounts (id);
ALTER TABLE partners ADD COLUMN decided_at timestamptz;
ALTER TABLE partners ADD COLUMN decided_by text;

-- What happened to a partner's account, by whom (partners are not tenants: the tenant audit log
-- has no place for them). Written in the transaction of the change.
CREATE TABLE partner_audit (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  partner_id uuid NOT NULL REFERENCES partners (id),
  occurred_at timestamptz NOT NULL,
  actor text NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
  action text NOT NULL CHECK (length(action) BETWEEN 1 AND 100),
  resource text NOT NULL CHECK (length(resource) BETWEEN 1 AND 200),
  details jsonb NOT NULL DEFAULT '{}'::jsonb,
  client_ip text,
  request_id text
);
CREATE INDEX partner_audit_partner_idx ON partner_audit (partner_id, id DESC);
