import { randomUUID } from 'node:crypto'
import type { Static } from 'typebox'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Actor } from '../auth/request-context.ts'
import type { Queryable, Sql } from '../data/database.ts'
import type { Clock } from '../platform/clock.ts'
import { AppError, isForeignKeyViolation, isUniqueViolation, notFound } from '../platform/errors.ts'
import {
  ancestorIds,
  countChildren,
  deleteFolder,
  type FolderWithPath,
  findFolder,
  insertFolder,
  listFolders,
  lockFolder,
  subtreeHeight,
  updateFolder,
} from './folder-store.ts'
import type { FolderSchema } from './secret-schemas.ts'
import { countLiveSecretsIn, detachDeletedSecrets } from './secret-store.ts'

/** Folders nest at most this deep, so paths stay readable and tree walks stay short. */
const MAX_FOLDER_DEPTH = 20

type FolderView = Static<typeof FolderSchema>

export interface FolderService {
  create(actor: Actor, body: { name: string; parentId?: string | null | undefined }): Promise<FolderView>
  get(actor: Actor, id: string): Promise<FolderView>
  list(
    actor: Actor,
    parent: string | null | undefined,
    page: { limit: number; offset: number },
  ): Promise<{ data: FolderView[]; total: number }>
  update(
    actor: Actor,
    id: string,
    body: { name?: string | undefined; parentId?: string | null | undefined },
  ): Promise<FolderView>
  /** Only an empty folder (no subfolders, no live secrets) can be deleted. */
  remove(actor: Actor, id: string): Promise<void>
  /** 404 folder_not_found unless the folder exists in the tenant: for secrets placed in it. */
  requireFolder(db: Queryable, tenantId: string, id: string): Promise<void>
}

const folderNotFound = () => notFound('folder_not_found', 'Folder')
const notEmpty = (details?: Record<string, number>) =>
  new AppError(409, 'folder_not_empty', 'Move or delete its subfolders and secrets first', details)
const nameTaken = () => new AppError(409, 'folder_name_taken', 'A folder with this name already exists here')

function toView(row: FolderWithPath): FolderView {
  return {
    id: row.id,
    name: row.name,
    parentId: row.parent_id,
    path: row.path,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    createdBy: row.created_by,
    updatedBy: row.updated_by,
  }
}

export function createFolderService(deps: { sql: Sql; audit: AuditLog; clock: Clock }): FolderService {
  const { sql, audit, clock } = deps

  const record = (
    tx: Queryable,
    actor: Actor,
    action: string,
    id: string,
    details?: Record<string, string | null>,
  ) =>
    audit.recordInTransaction(tx, {
      tenantId: actor.tenantId,
      actor: actor.actor,
      action,
      resource: `folder:${id}`,
      outcome: 'success',
      requestId: actor.requestId,
      clientIp: actor.clientIp,
      details: details ?? null,
    })

  /**
   * Structure changes of one tenant's tree run one at a time: two concurrent moves could each
   * pass the cycle check and together make a loop.
   */
  const lockTree = (tx: Queryable, tenantId: string) =>
    tx`SELECT pg_advisory_xact_lock(hashtextextended(${`kms:folders:${tenantId}`}, 0))`

  async function depthOf(tx: Queryable, id: string): Promise<number> {
    return (await ancestorIds(tx, id)).length + 1
  }

  async function writing<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work()
    } catch (error) {
      if (isUniqueViolation(error, 'secret_folders_sibling_name_idx')) throw nameTaken()
      // A secret was put in the folder by a concurrent request after the emptiness check.
      if (isForeignKeyViolation(error, 'secrets_folder_id_fkey')) throw notEmpty()
      throw error
    }
  }

  async function requireFolder(db: Queryable, tenantId: string, id: string): Promise<void> {
    const [row] = await db`SELECT 1 FROM secret_folders WHERE tenant_id = ${tenantId} AND id = ${id}`
    if (!row) throw folderNotFound()
  }

  async function get(actor: Actor, id: string, db: Queryable = sql): Promise<FolderView> {
    const row = await findFolder(db, actor.tenantId, id)
    if (!row) throw folderNotFound()
    return toView(row)
  }

  const tooDeep = () =>
    new AppError(409, 'folder_too_deep', `Folders nest at most ${MAX_FOLDER_DEPTH} levels deep`, {
      maxDepth: MAX_FOLDER_DEPTH,
    })

  return {
    requireFolder,
    get: (actor, id) => get(actor, id),

    async create(actor, body) {
      const id = randomUUID()
      const now = clock.now()
      return writing(() =>
        sql.begin(async (tx) => {
          const parentId = body.parentId ?? null
          if (parentId) {
            await lockTree(tx, actor.tenantId)
            await requireFolder(tx, actor.tenantId, parentId)
            if ((await depthOf(tx, parentId)) + 1 > MAX_FOLDER_DEPTH) throw tooDeep()
          }
          await insertFolder(tx, {
            id,
            tenant_id: actor.tenantId,
            parent_id: parentId,
            name: body.name,
            created_at: now,
            created_by: actor.actor,
            updated_at: now,
            updated_by: actor.actor,
          })
          await record(tx, actor, 'folders.create', id, { parentId })
          return get(actor, id, tx)
        }),
      )
    },

    async list(actor, parent, page) {
      if (parent) await requireFolder(sql, actor.tenantId, parent)
      const { rows, total } = await listFolders(sql, actor.tenantId, parent, page)
      return { data: rows.map(toView), total }
    },

    async update(actor, id, body) {
      const now = clock.now()
      return writing(() =>
        sql.begin(async (tx) => {
          await lockTree(tx, actor.tenantId)
          const current = await lockFolder(tx, actor.tenantId, id)
          if (!current) throw folderNotFound()
          const parentId = body.parentId === undefined ? current.parent_id : body.parentId
          if (body.parentId !== undefined && parentId !== current.parent_id && parentId !== null) {
            await requireFolder(tx, actor.tenantId, parentId)
            if (parentId === id || (await ancestorIds(tx, parentId)).includes(id)) {
              throw new AppError(
                409,
                'folder_cycle',
                'A folder cannot move into itself or one of its subfolders',
              )
            }
            const height = await subtreeHeight(tx, id)
            if ((await depthOf(tx, parentId)) + height > MAX_FOLDER_DEPTH) throw tooDeep()
          }
          await updateFolder(tx, id, {
            ...(body.name === undefined ? {} : { name: body.name }),
            parent_id: parentId,
            updated_at: now,
            updated_by: actor.actor,
          })
          await record(tx, actor, 'folders.update', id, { parentId, name: body.name ?? current.name })
          return get(actor, id, tx)
        }),
      )
    },

    async remove(actor, id) {
      await writing(() =>
        sql.begin(async (tx) => {
          await lockTree(tx, actor.tenantId)
          const current = await lockFolder(tx, actor.tenantId, id)
          if (!current) throw folderNotFound()
          const children = await countChildren(tx, id)
          const secrets = await countLiveSecretsIn(tx, id)
          if (children > 0 || secrets > 0) throw notEmpty({ subfolders: children, secrets })
          await detachDeletedSecrets(tx, id)
          await deleteFolder(tx, id)
          await record(tx, actor, 'folders.delete', id)
        }),
      )
    },
  }
}
