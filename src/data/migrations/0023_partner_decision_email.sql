-- The e-mail telling a partner who signed up of the operator's decision (issue 20): the partner
-- row is its outbox, as an access request is for its decision e-mail.
ALTER TABLE partners ADD COLUMN decision_email_status text
  CHECK (decision_email_status IN ('queued', 'sent', 'failed'));
ALTER TABLE partners ADD COLUMN decision_email_error text;
