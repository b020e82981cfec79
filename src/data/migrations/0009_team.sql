-- Team (issue 17): who is a member of which tenant with which role, and invitations.

CREATE TABLE team_memberships (
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  account_id uuid NOT NULL REFERENCES accounts (id),
  role text NOT NULL CHECK (role IN ('tenant:owner', 'tenant:admin', 'tenant:developer', 'tenant:viewer')),
  created_at timestamptz NOT NULL DEFAULT now(),
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, account_id)
);
CREATE INDEX team_memberships_account_idx ON team_memberships (account_id);

CREATE TABLE team_invitations (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  email text NOT NULL,
  email_normalized text NOT NULL,
  role text NOT NULL CHECK (role IN ('tenant:owner', 'tenant:admin', 'tenant:developer', 'tenant:viewer')),
  -- SHA-256 of the link's token; the token itself is kept only until the e-mail is out, sealed
  -- under the master keyring (token_sealed, cleared once sent or failed).
  token_hash bytea NOT NULL UNIQUE,
  token_sealed bytea,
  token_master_key_id text,
  created_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  consumed_at timestamptz,
  consumed_by uuid,
  revoked_at timestamptz,
  email_dispatch_status text NOT NULL CHECK (email_dispatch_status IN ('queued', 'sent', 'failed')),
  -- A reason code (smtp_refused, smtp_timeout ...), never a server's words or credentials.
  dispatch_error text,
  queued_at timestamptz NOT NULL DEFAULT now(),
  dispatched_at timestamptz,
  -- Bumped by a resend: the delivery job of an older send finds a newer one and does nothing.
  send_count integer NOT NULL DEFAULT 1
);
CREATE INDEX team_invitations_tenant_idx ON team_invitations (tenant_id, created_at);
CREATE INDEX team_invitations_queued_idx ON team_invitations (queued_at) WHERE email_dispatch_status = 'queued';
