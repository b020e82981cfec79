-- The partner programme (issue 20): partners, their API keys and referral codes, the tenants
-- they referred and the commissions those earn. Partners are not tenants: their keys work on
-- /api/v1/partners/* only, and tenants' keys never work there.
CREATE TABLE partners (
  id uuid PRIMARY KEY,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  email text NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
  status text NOT NULL CHECK (status IN ('active', 'suspended')),
  created_at timestamptz NOT NULL,
  created_by text NOT NULL
);

-- `kmsp_` keys: the first 12 characters after the prefix find the row; only the SHA-256 is kept.
CREATE TABLE partner_api_keys (
  id uuid PRIMARY KEY,
  partner_id uuid NOT NULL REFERENCES partners (id),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  lookup_id text NOT NULL UNIQUE,
  secret_hash bytea NOT NULL,
  created_at timestamptz NOT NULL,
  created_by text NOT NULL,
  revoked_at timestamptz
);
CREATE INDEX partner_api_keys_partner_idx ON partner_api_keys (partner_id, created_at);

CREATE TABLE referral_codes (
  code text PRIMARY KEY CHECK (code ~ '^[A-Z0-9]{8,32}$'),
  partner_id uuid NOT NULL REFERENCES partners (id),
  label text NOT NULL CHECK (length(label) BETWEEN 1 AND 100),
  created_at timestamptz NOT NULL
);
CREATE INDEX referral_codes_partner_idx ON referral_codes (partner_id, created_at);

-- One referral per tenant: a tenant is attributed to one partner, at sign-up.
CREATE TABLE referrals (
  id uuid PRIMARY KEY,
  partner_id uuid NOT NULL REFERENCES partners (id),
  tenant_id uuid NOT NULL UNIQUE REFERENCES tenants (id),
  code text NOT NULL REFERENCES referral_codes (code),
  status text NOT NULL CHECK (status IN ('active', 'converted', 'churned')),
  created_at timestamptz NOT NULL,
  converted_at timestamptz
);
CREATE INDEX referrals_partner_idx ON referrals (partner_id, created_at DESC, id);

-- Exactly one commission per referral and month (the unique key), whoever calculates it.
CREATE TABLE commissions (
  id uuid PRIMARY KEY,
  partner_id uuid NOT NULL REFERENCES partners (id),
  referral_id uuid NOT NULL REFERENCES referrals (id),
  period text NOT NULL CHECK (period ~ '^[0-9]{4}-[0-9]{2}$'),
  amount_minor bigint NOT NULL CHECK (amount_minor >= 0),
  currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
  status text NOT NULL CHECK (status IN ('calculated', 'paid')),
  calculated_at timestamptz NOT NULL,
  paid_at timestamptz,
  CONSTRAINT commissions_referral_period_unique UNIQUE (referral_id, period)
);
CREATE INDEX commissions_partner_period_idx ON commissions (partner_id, period);

-- A partner's payout for a month: the commissions of that month, paid once.
CREATE TABLE payouts (
  partner_id uuid NOT NULL REFERENCES partners (id),
  period text NOT NULL CHECK (period ~ '^[0-9]{4}-[0-9]{2}$'),
  amount_minor bigint NOT NULL CHECK (amount_minor >= 0),
  currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
  paid_at timestamptz NOT NULL,
  paid_by text NOT NULL,
  PRIMARY KEY (partner_id, period)
);
