import { createContext, type ReactNode, useContext } from 'react'
import type { Schemas } from '../api/client.ts'

export type Role = NonNullable<Schemas['CurrentTenant']['role']>

/**
 * Who is signed in and where: the tenant of the access token with the caller's role and scopes
 * (GET /api/v1/tenant) and every tenant the person belongs to (GET /api/v1/me). Pages ask it what
 * the person may do, to hide or disable what the API would refuse; the API still decides.
 */
export interface Workspace {
  tenant: Schemas['CurrentTenant']
  me: Schemas['Me']
  role: Role | undefined
  /** Whether the caller holds the scope (the API's per-route access, docs/console.md). */
  can(scope: string): boolean
  /** Whether the caller holds one of the roles (routes that admit roles, not scopes). */
  hasRole(...roles: Role[]): boolean
}

export const ROLE_NAMES: Record<Role, string> = {
  'tenant:owner': 'Owner',
  'tenant:admin': 'Admin',
  'tenant:developer': 'Developer',
  'tenant:viewer': 'Viewer',
}

export function workspaceOf(tenant: Schemas['CurrentTenant'], me: Schemas['Me']): Workspace {
  const scopes = new Set(tenant.scopes)
  return {
    tenant,
    me,
    role: tenant.role,
    can: (scope) => scopes.has(scope),
    hasRole: (...roles) => tenant.role !== undefined && roles.includes(tenant.role),
  }
}

const WorkspaceContext = createContext<Workspace | null>(null)

export function WorkspaceProvider(props: { value: Workspace; children: ReactNode }) {
  return <WorkspaceContext value={props.value}>{props.children}</WorkspaceContext>
}

export function useWorkspace(): Workspace {
  const workspace = useContext(WorkspaceContext)
  if (!workspace) throw new Error('useWorkspace outside the signed-in console')
  return workspace
}

/** Why an action is disabled, for a tooltip or the text beside it. */
export const needsScope = (scope: string) => `Your role does not include ${scope}`
export const needsRole = (...roles: Role[]) =>
  `Only ${roles.map((role) => ROLE_NAMES[role]).join(' or ')} members can do this`
