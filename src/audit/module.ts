import type { Module } from '../platform/module.ts'
import type { AuditLog } from './audit-log.ts'
import { auditRoutes } from './audit-routes.ts'

/**
 * The audit log: its records, read per tenant. `audit-time-map-sweep` (maintenance) maps the
 * settled records' ids to their times, which turns GET /audit's time range into id bounds.
 */
export function auditModule(deps: { audit: AuditLog }): Module {
  return {
    name: 'audit',
    routes: auditRoutes(deps.audit),
    jobs: {
      sweeps: [
        {
          name: 'audit-time-map-sweep',
          queue: 'maintenance',
          async run() {
            const mapped = await deps.audit.feed.foldTimeMap()
            // Runs at every sweep while records are written: not worth a line.
            return { worked: false, details: { mapped } }
          },
        },
      ],
    },
  }
}
