import type { Sql } from '../data/database.ts'
import type { Module } from '../platform/module.ts'
import { auditRoutes } from './audit-routes.ts'

/** The audit log: its records, read per tenant. */
export function auditModule(deps: { sql: Sql }): Module {
  return { name: 'audit', routes: auditRoutes(deps.sql) }
}
