import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider } from '@tanstack/react-router'
import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import { api, must } from './api/client.ts'
import {
  completeSignIn,
  currentSession,
  isTenantId,
  lastTenant,
  SignInError,
  signIn,
  tenantsOfPerson,
} from './auth/session.ts'
import { WorkspaceProvider, workspaceOf } from './auth/workspace.tsx'
import { router } from './router.tsx'
import { SignedOut, SignInProblem, Starting } from './shell/SignInPages.tsx'
import { applyTheme, storedTheme } from './theme.ts'
import './styles.css'

applyTheme(storedTheme())
// react-aria adds a <style> element for its pressable elements unless one with this id exists;
// the CSP admits no inline style, so the rule is in styles.css and this marker stands in for it.
const pressableStyle = document.createElement('meta')
pressableStyle.id = 'react-aria-pressable-style'
document.head.append(pressableStyle)
const root = createRoot(document.getElementById('root')!)
const render = (node: React.ReactNode) => root.render(<StrictMode>{node}</StrictMode>)

/** Where the person is going, under /console/ (the deep link they opened, or the one they came back to). */
const here = () => `${window.location.pathname}${window.location.search}${window.location.hash}`

/**
 * Start-up: come back from the provider, or go to it, until there is a token for a tenant; then
 * learn the caller (GET /tenant, GET /me) and show the console.
 */
async function start(): Promise<void> {
  render(<Starting />)
  const url = new URL(window.location.href)
  if (url.pathname === '/console/callback') {
    if (!url.searchParams.has('code') && !url.searchParams.has('error')) {
      render(<SignedOut />)
      return
    }
    const { returnTo } = await completeSignIn(url)
    window.history.replaceState(null, '', returnTo)
  }
  const session = currentSession()
  if (!session) {
    const asked = url.searchParams.get('tenant')
    await signIn({ tenantId: isTenantId(asked) ? asked : lastTenant(), returnTo: here() })
    return
  }
  if (!session.tenantId) {
    // Signed in without a tenant (a first visit): the provider says which tenants the person has.
    const [first] = await tenantsOfPerson()
    if (!first)
      throw new SignInError(
        'no_tenant',
        'Your account is not a member of any tenant. Ask an owner for an invitation.',
      )
    await signIn({ tenantId: first, returnTo: here() })
    return
  }
  const [tenant, me] = await Promise.all([
    must(await api.GET('/api/v1/tenant')),
    must(await api.GET('/api/v1/me')),
  ])
  const queryClient = new QueryClient({
    defaultOptions: {
      queries: { retry: 1, staleTime: 10_000, refetchOnWindowFocus: false },
      // A mutation's variables and answer (a new API key, a plaintext, a secret's value) are
      // dropped as soon as nothing shows them, not kept five minutes in the cache.
      mutations: { gcTime: 0 },
    },
  })
  render(
    <WorkspaceProvider value={workspaceOf(tenant, me)}>
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
      </QueryClientProvider>
    </WorkspaceProvider>,
  )
}

start().catch((error: unknown) => {
  const problem =
    error instanceof SignInError
      ? error
      : new SignInError('start_failed', error instanceof Error ? error.message : String(error))
  render(<SignInProblem error={problem} />)
})
