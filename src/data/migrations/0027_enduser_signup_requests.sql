-- Sign-up on an application's pages (issue 30): nothing of the end-user (no account, no record,
-- nothing billing counts) exists until the address is proven by the link e-mailed to it. The row
-- is that e-mail's outbox (as `signups` is for tenants); using the link creates the account and
-- the record, with the row's id as theirs, in the transaction that marks the row used.
CREATE TABLE enduser_signup_requests (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  application_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
  email text NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
  email_normalized text NOT NULL,
  -- What the per-address limit counts: lower case and the local part's `+tag` removed, so
  -- `victim+1@x` and `victim+2@x` are one mailbox. Dots are kept (only some providers ignore them).
  address_key text NOT NULL,
  token_hash bytea NOT NULL UNIQUE,
  link_sealed bytea,
  link_master_key_id text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  consumed_at timestamptz,
  email_dispatch_status text NOT NULL CHECK (email_dispatch_status IN ('queued', 'sent', 'failed')),
  dispatch_error text,
  dispatched_at timestamptz,
  -- Set when the link made the end-user; a used link without it found the address taken.
  enduser_id uuid
);
CREATE INDEX enduser_signup_requests_address_idx
  ON enduser_signup_requests (tenant_id, address_key, created_at);
CREATE INDEX enduser_signup_requests_queued_idx
  ON enduser_signup_requests (created_at) WHERE email_dispatch_status = 'queued';
