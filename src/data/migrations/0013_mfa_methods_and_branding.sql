-- Issue 18: e-mail and SMS one-time codes as MFA methods, per-application MFA methods and
-- login-panel branding, and the tenant's own branding.

-- A verified phone number is an enrolled SMS factor.
ALTER TABLE accounts ADD COLUMN phone_number text CHECK (phone_number IS NULL OR phone_number ~ '^\+[1-9][0-9]{6,14}$');
ALTER TABLE accounts ADD COLUMN phone_verified_at timestamptz;

-- One-time codes sent by e-mail or SMS: stored as an HMAC under a key of the master keyring (a
-- six-digit code's plain hash would be found by trying a million), short-lived, single use, with
-- a bounded number of wrong tries. The code itself is kept sealed only until it is sent.
CREATE TABLE account_otps (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  channel text NOT NULL CHECK (channel IN ('email', 'sms')),
  destination text NOT NULL,
  code_hmac bytea NOT NULL,
  code_sealed bytea,
  master_key_id text NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  consumed_at timestamptz,
  revoked_at timestamptz,
  failed_attempts integer NOT NULL DEFAULT 0,
  dispatch_status text NOT NULL CHECK (dispatch_status IN ('queued', 'sent', 'failed')),
  dispatch_error text
);
CREATE INDEX account_otps_account_idx ON account_otps (account_id, channel, created_at);

-- NULL: the tenant's MFA methods apply; otherwise they replace them in full.
ALTER TABLE applications ADD COLUMN mfa_methods jsonb;
-- {"loginPanel": {"imageUrl": ..., "translations": {"en": {"title", "text"}, ...}}}; NULL: none.
ALTER TABLE applications ADD COLUMN branding jsonb;
-- People may create their own account on the sign-in pages of this application.
ALTER TABLE applications ADD COLUMN sign_up_enabled boolean NOT NULL DEFAULT false;

-- The tenant's login panel, the fallback of applications that set none.
ALTER TABLE tenant_settings ADD COLUMN branding jsonb NOT NULL DEFAULT '{}'::jsonb;
