-- Linking a federated sign-in to an existing account (issue 30): by default an IdP's first
-- sign-in for an address never takes over an end-user who already has a password or a second
-- factor, since whoever registered the IdP controls what it asserts. An owner or admin may mark
-- a registration as trusted to link by its (verified) address anyway; audited when set.
ALTER TABLE saml_identity_providers ADD COLUMN link_by_verified_email boolean NOT NULL DEFAULT false;
