-- Tenant security settings (issue 17): one row per tenant once changed; no row reads the defaults.

CREATE TABLE tenant_settings (
  tenant_id uuid PRIMARY KEY REFERENCES tenants (id),
  -- The security settings document (src/settings/settings-service.ts): only what was set is kept,
  -- the rest reads as the defaults of the release that reads it.
  security jsonb NOT NULL DEFAULT '{}'::jsonb,
  updated_at timestamptz NOT NULL DEFAULT now(),
  updated_by text
);
