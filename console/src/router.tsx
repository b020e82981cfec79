import {
  createRootRoute,
  createRoute,
  createRouter,
  lazyRouteComponent,
  redirect,
} from '@tanstack/react-router'
import { auditSearch, keysSearch, listSearch, secretsSearch, trySearch } from './search.ts'
import { NotFound, Shell } from './shell/Shell.tsx'

/**
 * The console's routes (typed: each page reads its params and search through getRouteApi with
 * its path). Pages load on first visit (one chunk per area), which keeps the first load small.
 */
const rootRoute = createRootRoute({ component: Shell, notFoundComponent: NotFound })

const page = <T extends Record<string, unknown>>(load: () => Promise<T>, name: keyof T & string) =>
  lazyRouteComponent(load, name)

const indexRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/',
  beforeLoad: () => {
    throw redirect({ to: '/keys' })
  },
})
const keysRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/keys',
  validateSearch: keysSearch,
  component: page(() => import('./pages/keys/KeysPage.tsx'), 'KeysPage'),
})
const createKeyRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/keys/new',
  component: page(() => import('./pages/keys/CreateKeyPage.tsx'), 'CreateKeyPage'),
})
const importKeyRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/keys/import',
  component: page(() => import('./pages/keys/ImportKeyPage.tsx'), 'ImportKeyPage'),
})
const keyRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/keys/$keyId',
  component: page(() => import('./pages/keys/KeyDetailPage.tsx'), 'KeyDetailPage'),
})
const tryRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/try',
  validateSearch: trySearch,
  component: page(() => import('./pages/try/TryItPage.tsx'), 'TryItPage'),
})
const secretsRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/secrets',
  validateSearch: secretsSearch,
  component: page(() => import('./pages/secrets/SecretsPage.tsx'), 'SecretsPage'),
})
const secretRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/secrets/$secretId',
  component: page(() => import('./pages/secrets/SecretDetailPage.tsx'), 'SecretDetailPage'),
})
const apiKeysRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/api-keys',
  validateSearch: listSearch,
  component: page(() => import('./pages/api-keys/ApiKeysPage.tsx'), 'ApiKeysPage'),
})
const teamRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/team',
  component: page(() => import('./pages/team/TeamPage.tsx'), 'TeamPage'),
})
const settingsRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/settings',
  component: page(() => import('./pages/settings/SettingsPage.tsx'), 'SettingsPage'),
})
const auditRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: '/audit',
  validateSearch: auditSearch,
  component: page(() => import('./pages/audit/AuditPage.tsx'), 'AuditPage'),
})

const routeTree = rootRoute.addChildren([
  indexRoute,
  keysRoute,
  createKeyRoute,
  importKeyRoute,
  keyRoute,
  tryRoute,
  secretsRoute,
  secretRoute,
  apiKeysRoute,
  teamRoute,
  settingsRoute,
  auditRoute,
])

export const router = createRouter({ routeTree, basepath: '/console', defaultPreload: 'intent' })

declare module '@tanstack/react-router' {
  interface Register {
    router: typeof router
  }
}
