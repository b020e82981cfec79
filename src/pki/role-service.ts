import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Sql } from '../data/database.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, isUniqueViolation, notFound } from '../platform/errors.ts'
import type { CaService } from './ca-service.ts'
import type { CreateRoleBody, UpdateRoleBody } from './pki-schemas.ts'
import {
  deleteRole,
  getRole,
  insertRole,
  listRoles,
  ROLE_CONSTRAINT,
  type RoleRow,
  updateRole,
} from './pki-store.ts'
import { DEFAULT_ROLE, type RoleSettings, roleSettings } from './role-policy.ts'

type RoleView = RoleSettings & { name: string; caId: string; createdAt: string; updatedAt: string }

/** Settings stored by an older version lack the fields added since: the defaults fill them. */
export const settingsOf = (row: RoleRow): RoleSettings => ({
  ...DEFAULT_ROLE,
  ...(row.settings as Partial<RoleSettings>),
})

const view = (row: RoleRow): RoleView => ({
  name: row.name,
  caId: row.ca_id,
  ...settingsOf(row),
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
})

export const roleNotFound = () => notFound('role_not_found', 'Role')

export interface RoleService {
  create(actor: Actor, caId: string, input: CreateRoleBody): Promise<RoleView>
  list(actor: Actor, caId: string): Promise<{ data: RoleView[] }>
  get(actor: Actor, caId: string, name: string): Promise<RoleView>
  update(actor: Actor, caId: string, name: string, input: UpdateRoleBody): Promise<RoleView>
  remove(actor: Actor, caId: string, name: string): Promise<void>
}

/** Roles of a CA (Vault's model): what the CA certifies when asked through each. */
export function createCertificateRoleService(deps: {
  sql: Sql
  audit: AuditLog
  cas: CaService
  clock: Clock
}): RoleService {
  const { sql, audit } = deps
  const record = (actor: Actor, action: string, caId: string, name: string) =>
    audit.record({ ...actor, action, resource: `ca:${caId}`, outcome: 'success', details: { role: name } })

  return {
    async create(actor, caId, input) {
      await deps.cas.row(actor, caId)
      const { name, ...changes } = input
      const settings = roleSettings(DEFAULT_ROLE, changes)
      const now = deps.clock.now()
      let row: RoleRow
      try {
        row = await insertRole(sql, {
          tenant_id: actor.tenantId,
          ca_id: caId,
          name,
          settings: settings as unknown as Record<string, unknown>,
          created_at: now,
          updated_at: now,
        })
      } catch (error) {
        if (isUniqueViolation(error, ROLE_CONSTRAINT))
          throw new AppError(409, 'role_exists', `The CA has a role named ${name}`)
        throw error
      }
      await record(actor, 'pki.role_create', caId, name)
      return view(row)
    },

    async list(actor, caId) {
      await deps.cas.row(actor, caId)
      return { data: (await listRoles(sql, actor.tenantId, caId)).map(view) }
    },

    async get(actor, caId, name) {
      await deps.cas.row(actor, caId)
      const row = await getRole(sql, actor.tenantId, caId, name)
      if (!row) throw roleNotFound()
      return view(row)
    },

    async update(actor, caId, name, input) {
      await deps.cas.row(actor, caId)
      const current = await getRole(sql, actor.tenantId, caId, name)
      if (!current) throw roleNotFound()
      const settings = roleSettings(settingsOf(current), input)
      const row = await updateRole(
        sql,
        actor.tenantId,
        caId,
        name,
        settings as unknown as Record<string, unknown>,
        deps.clock.now(),
      )
      if (!row) throw roleNotFound()
      await record(actor, 'pki.role_update', caId, name)
      return view(row)
    },

    async remove(actor, caId, name) {
      await deps.cas.row(actor, caId)
      if (!(await deleteRole(sql, actor.tenantId, caId, name))) throw roleNotFound()
      await record(actor, 'pki.role_delete', caId, name)
    },
  }
}
