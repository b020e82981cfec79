-- Cloud exports of keys not created exportable (issue 31, defect 1): the export-private route
-- refused such a key, but a cloud export sent its private key out and every rotation pushed the
-- new version. The service now refuses to create or push them; the exports that exist stop here,
-- failed with key_not_exportable (not due again, so not one more push), and each stop is in the
-- tenant's audit log as the failure of a sync, the way the push path records it. What a cloud
-- already holds stays there: the export names it (providerKeyId) so the tenant can delete it.
WITH stopped AS (
  UPDATE cloud_exports e
  SET sync_status = 'failed',
      last_sync_error_code = 'key_not_exportable',
      last_sync_error = 'The key was not created or imported with exportable: true; its private key is not sent to a cloud KMS',
      next_attempt_at = NULL
  FROM keys k
  WHERE k.id = e.key_id AND NOT k.exportable
  RETURNING e.id, e.tenant_id, e.key_id, e.provider, e.desired_version, e.provider_key_id
)
INSERT INTO audit_log (tenant_id, actor, action, resource, key_version, outcome, details)
SELECT tenant_id, 'migration', 'keys.cloud_export.sync', 'key:' || key_id, desired_version, 'failure',
       jsonb_build_object('exportId', id, 'provider', provider, 'error', 'key_not_exportable',
                          'willRetry', false, 'level', 'warning',
                          'providerKeyId', provider_key_id)
FROM stopped;
