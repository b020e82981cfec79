-- Access policies (issue 19): who may sign in to a tenant's applications, decided when an
-- end-user signs in and when a refresh token is used. The first policy that matches, by
-- priority (lowest number first), decides; no match allows. A priority is unique within a tenant,
-- so the order never depends on how rows happen to be read.
CREATE TABLE access_policies (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  description text NOT NULL DEFAULT '' CHECK (length(description) <= 1000),
  -- Allow, Deny, AllowWithApproval. Any other value (RequireMfa, written before this release or
  -- by hand) is not refused here: the evaluator treats it as a refusal.
  action text NOT NULL CHECK (length(action) BETWEEN 1 AND 64),
  priority integer NOT NULL CHECK (priority BETWEEN 0 AND 1000000),
  -- Conditions; an empty list does not narrow.
  application_ids uuid[] NOT NULL DEFAULT '{}',
  enduser_ids uuid[] NOT NULL DEFAULT '{}',
  role_ids uuid[] NOT NULL DEFAULT '{}',
  ip_ranges text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  created_by text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT access_policies_priority_unique UNIQUE (tenant_id, priority)
);

-- A sign-in waiting for a team member's decision (AllowWithApproval). Pending requests lapse
-- (status 'expired'); an approval lets the end-user in to the application until access_expires_at.
CREATE TABLE access_requests (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (id),
  application_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
  account_id uuid NOT NULL,
  policy_id uuid REFERENCES access_policies (id) ON DELETE SET NULL,
  status text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'expired')),
  source_ip text,
  requested_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  decided_at timestamptz,
  decided_by text,
  reason text CHECK (reason IS NULL OR length(reason) <= 500),
  access_expires_at timestamptz,
  -- The decision's e-mail to the requester.
  email_dispatch_status text CHECK (email_dispatch_status IN ('queued', 'sent', 'failed')),
  dispatch_error text
);
CREATE UNIQUE INDEX access_requests_one_pending ON access_requests (application_id, account_id)
  WHERE status = 'pending';
CREATE INDEX access_requests_tenant_idx ON access_requests (tenant_id, requested_at DESC, id);
CREATE INDEX access_requests_account_idx ON access_requests (account_id, application_id, status);
