import type { Module } from '../platform/module.ts'
import type { AuditLog } from './audit-log.ts'
import { auditRoutes } from './audit-routes.ts'

/** The audit log: its records, read per tenant. */
export function auditModule(deps: { audit: AuditLog }): Module {
  return { name: 'audit', routes: auditRoutes(deps.audit) }
}
