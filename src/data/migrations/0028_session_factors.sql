-- The factors a sign-in session has satisfied (issue 30): every authorization, including one that
-- reuses a remembered login, compares what the client, tenant and application require with this
-- list, and asks for what is missing (step-up). Keyed by the provider's session uid, which stays
-- the same across the session's cookie rotations; a row counts only for the account it was proven
-- by. Rows outlive nothing: they expire with the session and are swept with the provider's rows.
CREATE TABLE oidc_session_factors (
  session_uid text NOT NULL,
  account_id uuid NOT NULL,
  factor text NOT NULL CHECK (factor IN ('totp', 'email', 'sms')),
  satisfied_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (session_uid, factor)
);
CREATE INDEX oidc_session_factors_account_idx ON oidc_session_factors (account_id);
CREATE INDEX oidc_session_factors_expires_idx ON oidc_session_factors (expires_at);
