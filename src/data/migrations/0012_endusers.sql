-- End-users (issue 18): the people who use a tenant's applications. Their identity context (the
-- account in the realm 'tenant:<id>': credentials, MFA, sign-in enabled or not, sessions) is the
-- identity module's `accounts`; the end-user record (profile, status, applications, roles) is
-- the end-users module's. The record's id is the account's id, without a foreign key: permanent
-- deletion removes the identity user first, then the record.

CREATE TABLE endusers (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  email text NOT NULL,
  email_normalized text NOT NULL,
  display_name text CHECK (display_name IS NULL OR length(display_name) <= 200),
  status text NOT NULL CHECK (status IN ('active', 'blocked')),
  blocked_at timestamptz,
  -- How the record came to be: 'api' (create-without-password), 'app_creator' (a team member who
  -- registered an application), 'sign_up' (the provider's pages).
  source text NOT NULL CHECK (source IN ('api', 'app_creator', 'sign_up')),
  created_at timestamptz NOT NULL DEFAULT now(),
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT endusers_tenant_email_unique UNIQUE (tenant_id, email_normalized)
);
CREATE INDEX endusers_tenant_idx ON endusers (tenant_id, created_at, id);

-- An application's end-user list.
CREATE TABLE enduser_applications (
  enduser_id uuid NOT NULL REFERENCES endusers (id) ON DELETE CASCADE,
  application_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  added_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (enduser_id, application_id)
);
CREATE INDEX enduser_applications_app_idx ON enduser_applications (application_id, enduser_id);

-- Roles of an application, and which end-users hold them: they appear in that application's tokens.
CREATE TABLE application_roles (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  application_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  description text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
  permissions text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT application_roles_name_unique UNIQUE (application_id, name)
);
CREATE INDEX application_roles_tenant_idx ON application_roles (tenant_id, created_at, id);

CREATE TABLE enduser_roles (
  enduser_id uuid NOT NULL REFERENCES endusers (id) ON DELETE CASCADE,
  role_id uuid NOT NULL REFERENCES application_roles (id) ON DELETE CASCADE,
  assigned_at timestamptz NOT NULL DEFAULT now(),
  assigned_by text NOT NULL,
  PRIMARY KEY (enduser_id, role_id)
);
CREATE INDEX enduser_roles_role_idx ON enduser_roles (role_id);

-- One-time links of the identity module (password reset, account set-up): the token is stored
-- as its SHA-256 only; the link itself is kept sealed under the master keyring until the e-mail
-- is out. A new link of a kind for an account revokes the older ones.
CREATE TABLE account_links (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('reset', 'setup')),
  application_id uuid,
  token_hash bytea NOT NULL UNIQUE,
  link_sealed bytea,
  link_master_key_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  consumed_at timestamptz,
  revoked_at timestamptz,
  email_dispatch_status text NOT NULL CHECK (email_dispatch_status IN ('queued', 'sent', 'failed')),
  dispatch_error text,
  dispatched_at timestamptz
);
CREATE INDEX account_links_account_idx ON account_links (account_id, kind);
CREATE INDEX account_links_queued_idx ON account_links (created_at) WHERE email_dispatch_status = 'queued';

-- Blocking or deleting an end-user ends everything of their account in the provider's storage.
CREATE INDEX oidc_models_account_idx ON oidc_models ((payload->>'accountId'));
