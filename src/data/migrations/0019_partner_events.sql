-- Partner events (issue 20) go through the webhook outbox: a delivery belongs to a tenant or,
-- now, to a partner (exactly one of them).
ALTER TABLE webhook_deliveries ALTER COLUMN tenant_id DROP NOT NULL;
ALTER TABLE webhook_deliveries ADD COLUMN partner_id uuid REFERENCES partners (id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_one_owner
  CHECK ((tenant_id IS NULL) <> (partner_id IS NULL));
CREATE INDEX webhook_deliveries_partner_idx ON webhook_deliveries (partner_id, created_at DESC)
  WHERE partner_id IS NOT NULL;

-- The partner's webhook secret, sealed under the master keyring (created on first use).
ALTER TABLE partners ADD COLUMN webhook_secret_sealed bytea;
ALTER TABLE partners ADD COLUMN webhook_secret_key_id text;

CREATE TABLE partner_webhook_endpoints (
  id uuid PRIMARY KEY,
  partner_id uuid NOT NULL REFERENCES partners (id),
  url text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
  created_at timestamptz NOT NULL,
  CONSTRAINT partner_webhook_endpoints_url_unique UNIQUE (partner_id, url)
);
