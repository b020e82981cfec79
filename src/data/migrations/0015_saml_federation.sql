-- SAML identity-provider federation (issue 19): a tenant's end-users sign in through an external
-- IdP. The service is the SAML service provider; one SP entity per registered IdP
-- ({ID_URL}/saml/{idpId}), so audience and ACS URL name the registration they belong to.
CREATE TABLE saml_identity_providers (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  entity_id text NOT NULL CHECK (length(entity_id) BETWEEN 1 AND 1024),
  sso_url text NOT NULL CHECK (length(sso_url) BETWEEN 1 AND 2048),
  -- The IdP's signing certificate as PEM, checked at registration.
  certificate text NOT NULL,
  certificate_sha256 text NOT NULL,
  certificate_not_after timestamptz NOT NULL,
  -- {email, name?}: the assertion attributes that carry them ('NameID' for the subject's NameID).
  attribute_mapping jsonb NOT NULL,
  -- The applications whose sign-in page offers it; empty: every application of the tenant.
  application_ids uuid[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT saml_idps_entity_unique UNIQUE (tenant_id, entity_id)
);

-- AuthnRequests sent: the response must answer one of them (InResponseTo), once, in time, and is
-- bound to the sign-in (the provider's interaction) that sent it.
CREATE TABLE saml_requests (
  id text PRIMARY KEY CHECK (length(id) <= 100),
  idp_id uuid NOT NULL REFERENCES saml_identity_providers (id) ON DELETE CASCADE,
  interaction_uid text NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  -- Set by the one response accepted for it: the account it signed in.
  answered_at timestamptz,
  account_id uuid,
  -- Set when the sign-in page has taken the result.
  completed_at timestamptz
);
CREATE INDEX saml_requests_expiry_idx ON saml_requests (expires_at);

-- Assertion ids seen, kept until the assertion could no longer be valid: an assertion is accepted once.
CREATE TABLE saml_assertions_seen (
  idp_id uuid NOT NULL REFERENCES saml_identity_providers (id) ON DELETE CASCADE,
  assertion_id text NOT NULL CHECK (length(assertion_id) <= 256),
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (idp_id, assertion_id)
);

-- Which account an IdP's subject (its NameID) is in the tenant's realm: set on first sign-in.
CREATE TABLE federated_identities (
  idp_id uuid NOT NULL REFERENCES saml_identity_providers (id) ON DELETE CASCADE,
  name_id text NOT NULL CHECK (length(name_id) BETWEEN 1 AND 512),
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_sign_in_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (idp_id, name_id)
);
CREATE INDEX federated_identities_account_idx ON federated_identities (account_id);

-- End-users first seen through an IdP are created with source 'federation'.
ALTER TABLE endusers DROP CONSTRAINT endusers_source_check;
ALTER TABLE endusers ADD CONSTRAINT endusers_source_check
  CHECK (source IN ('api', 'app_creator', 'sign_up', 'federation'));
