-- Identity (issue 17): accounts of the team realm, the OpenID provider's storage and token
-- signing keys, and sign-in throttling. Tenant realms (end-users) come with their own issue.

CREATE TABLE accounts (
  id uuid PRIMARY KEY,
  -- 'team' for team members; one realm per tenant later ('tenant:<id>').
  realm text NOT NULL CHECK (realm = 'team' OR realm LIKE 'tenant:%'),
  email text NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
  -- lower-cased, trimmed: what makes two addresses the same account.
  email_normalized text NOT NULL,
  display_name text CHECK (display_name IS NULL OR length(display_name) <= 200),
  -- PHC string of argon2id; NULL until the person sets one (invitation, set-up link).
  password_hash text,
  password_changed_at timestamptz,
  -- The TOTP secret, AES-256-GCM-sealed under the master keyring (totp_master_key_id).
  totp_secret_sealed bytea,
  totp_master_key_id text,
  totp_enrolled_at timestamptz,
  -- Last accepted TOTP time step: a code is accepted once.
  totp_last_step bigint,
  disabled_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT accounts_realm_email_unique UNIQUE (realm, email_normalized)
);

-- oidc-provider's models (sessions, interactions, codes, tokens, grants): one row per instance.
CREATE TABLE oidc_models (
  model text NOT NULL,
  id text NOT NULL,
  payload jsonb NOT NULL,
  grant_id text,
  uid text,
  user_code text,
  expires_at timestamptz,
  consumed_at timestamptz,
  PRIMARY KEY (model, id)
);
CREATE INDEX oidc_models_grant_idx ON oidc_models (grant_id) WHERE grant_id IS NOT NULL;
CREATE INDEX oidc_models_uid_idx ON oidc_models (uid) WHERE uid IS NOT NULL;
CREATE INDEX oidc_models_expires_idx ON oidc_models (expires_at) WHERE expires_at IS NOT NULL;

-- Token signing keys: versions of one ES256 key, private part sealed under the master keyring.
-- The newest unretired version signs; the JWKS publishes it and the versions retired recently.
CREATE TABLE oidc_signing_keys (
  version integer PRIMARY KEY,
  kid text NOT NULL UNIQUE,
  alg text NOT NULL,
  public_jwk jsonb NOT NULL,
  private_sealed bytea NOT NULL,
  master_key_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  retired_at timestamptz
);

-- Failed sign-in attempts per (account e-mail, client address): a lock-out an attacker causes
-- applies to the attacker's own address, never to the victim signing in from elsewhere.
CREATE TABLE sign_in_throttle (
  subject text NOT NULL,
  client_ip text NOT NULL,
  failures integer NOT NULL,
  window_started_at timestamptz NOT NULL,
  locked_until timestamptz,
  PRIMARY KEY (subject, client_ip)
);
CREATE INDEX sign_in_throttle_window_idx ON sign_in_throttle (window_started_at);
