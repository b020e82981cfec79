import { randomUUID } from 'node:crypto'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Sql } from '../data/database.ts'
import { AppError, invalidField, isUniqueViolation, notFound } from '../platform/errors.ts'
import {
  assignRole,
  deleteRole,
  getRole,
  insertRole,
  listRoles,
  type RoleRow,
  rolesOfEndUser,
  unassignRole,
  updateRole,
} from './role-store.ts'

export const ROLE_LIMITS = {
  nameChars: 100,
  descriptionChars: 500,
  permissions: 100,
  permissionChars: 100,
} as const

interface RoleView {
  id: string
  applicationId: string
  name: string
  description: string
  permissions: string[]
  createdAt: string
  updatedAt: string
}

interface RoleInput {
  applicationId: string
  name: string
  description?: string | undefined
  permissions?: string[] | undefined
}

interface RoleChange {
  name: string
  description?: string | undefined
  permissions?: string[] | undefined
}

/** What roles need of the other modules: an application and an end-user of the caller's tenant. */
export interface RoleDirectories {
  applicationExists(tenantId: string, applicationId: string): Promise<boolean>
  /** 404 `enduser_not_found` when the end-user is not the tenant's. */
  requireEndUser(actor: Actor, endUserId: string): Promise<void>
}

export interface RoleService {
  list(
    actor: Actor,
    applicationId: string | undefined,
    page: { limit: number; offset: number },
  ): Promise<{ data: RoleView[]; total: number }>
  get(actor: Actor, id: string): Promise<RoleView>
  create(actor: Actor, input: RoleInput): Promise<RoleView>
  /** description and permissions left out become empty: PUT replaces the role. */
  update(actor: Actor, id: string, change: RoleChange): Promise<RoleView>
  remove(actor: Actor, id: string): Promise<void>
  rolesOf(actor: Actor, endUserId: string): Promise<RoleView[]>
  /** Idempotent: the end-user's roles afterwards. */
  assign(actor: Actor, endUserId: string, roleId: string): Promise<RoleView[]>
  unassign(actor: Actor, endUserId: string, roleId: string): Promise<void>
  /** The provider: names of the roles an end-user holds in one application (for its tokens). */
  roleNamesFor(tenantId: string, endUserId: string, applicationId: string): Promise<string[]>
  /** Access policies: whether a role is the tenant's, and the ids of the roles an end-user holds. */
  exists(tenantId: string, roleId: string): Promise<boolean>
  roleIdsOf(tenantId: string, endUserId: string): Promise<string[]>
}

const toView = (row: RoleRow): RoleView => ({
  id: row.id,
  applicationId: row.application_id,
  name: row.name,
  description: row.description,
  permissions: row.permissions,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
})

function checkPermissions(permissions: readonly string[]): string[] {
  if (new Set(permissions).size !== permissions.length)
    throw invalidField('body/permissions', 'must not repeat a permission')
  return [...permissions]
}

/**
 * Roles of a tenant's applications (name, description, permissions as strings) and which
 * end-users hold them. The names of the roles an end-user holds in an application appear as the
 * `roles` claim of the ID and access tokens issued to that application.
 */
export function createRoleService(deps: {
  sql: Sql
  audit: AuditLog
  directories: RoleDirectories
}): RoleService {
  const { sql, audit } = deps
  const missing = () => notFound('role_not_found', 'Role')
  const duplicate = () =>
    new AppError(409, 'role_exists', 'The application already has a role with this name')

  async function required(actor: Actor, id: string): Promise<RoleRow> {
    const row = await getRole(sql, actor.tenantId, id)
    if (!row) throw missing()
    return row
  }

  return {
    async list(actor, applicationId, page) {
      const { rows, total } = await listRoles(sql, actor.tenantId, applicationId, page)
      return { data: rows.map(toView), total }
    },
    async get(actor, id) {
      return toView(await required(actor, id))
    },
    async create(actor, input) {
      if (!(await deps.directories.applicationExists(actor.tenantId, input.applicationId)))
        throw notFound('application_not_found', 'Application')
      const permissions = checkPermissions(input.permissions ?? [])
      const id = randomUUID()
      try {
        const row = await sql.begin(async (tx) => {
          const created = await insertRole(tx, {
            id,
            tenant_id: actor.tenantId,
            application_id: input.applicationId,
            name: input.name,
            description: input.description ?? '',
            permissions,
            created_by: actor.actor,
          })
          await audit.recordInTransaction(tx, {
            ...actor,
            action: 'roles.create',
            resource: `role:${id}`,
            outcome: 'success',
            details: { applicationId: input.applicationId, name: input.name },
          })
          return created
        })
        return toView(row)
      } catch (err) {
        if (isUniqueViolation(err, 'application_roles_name_unique')) throw duplicate()
        throw err
      }
    },
    async update(actor, id, change) {
      const permissions = checkPermissions(change.permissions ?? [])
      try {
        const row = await sql.begin(async (tx) => {
          const updated = await updateRole(tx, actor.tenantId, id, {
            name: change.name,
            description: change.description ?? '',
            permissions,
          })
          if (!updated) throw missing()
          await audit.recordInTransaction(tx, {
            ...actor,
            action: 'roles.update',
            resource: `role:${id}`,
            outcome: 'success',
          })
          return updated
        })
        return toView(row)
      } catch (err) {
        if (isUniqueViolation(err, 'application_roles_name_unique')) throw duplicate()
        throw err
      }
    },
    async remove(actor, id) {
      await sql.begin(async (tx) => {
        if (!(await deleteRole(tx, actor.tenantId, id))) throw missing()
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'roles.delete',
          resource: `role:${id}`,
          outcome: 'success',
        })
      })
    },
    async rolesOf(actor, endUserId) {
      await deps.directories.requireEndUser(actor, endUserId)
      return (await rolesOfEndUser(sql, actor.tenantId, endUserId)).map(toView)
    },
    async assign(actor, endUserId, roleId) {
      await deps.directories.requireEndUser(actor, endUserId)
      await required(actor, roleId)
      await sql.begin(async (tx) => {
        if (!(await assignRole(tx, { endUserId, roleId, by: actor.actor }))) return
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'roles.assign',
          resource: `enduser:${endUserId}`,
          outcome: 'success',
          details: { roleId },
        })
      })
      return (await rolesOfEndUser(sql, actor.tenantId, endUserId)).map(toView)
    },
    async unassign(actor, endUserId, roleId) {
      await deps.directories.requireEndUser(actor, endUserId)
      await required(actor, roleId)
      await sql.begin(async (tx) => {
        if (!(await unassignRole(tx, endUserId, roleId))) return
        await audit.recordInTransaction(tx, {
          ...actor,
          action: 'roles.unassign',
          resource: `enduser:${endUserId}`,
          outcome: 'success',
          details: { roleId },
        })
      })
    },
    async roleNamesFor(tenantId, endUserId, applicationId) {
      return (await rolesOfEndUser(sql, tenantId, endUserId, applicationId)).map((row) => row.name)
    },
    async exists(tenantId, roleId) {
      return (await getRole(sql, tenantId, roleId)) !== undefined
    },
    async roleIdsOf(tenantId, endUserId) {
      return (await rolesOfEndUser(sql, tenantId, endUserId)).map((row) => row.id)
    },
  }
}
