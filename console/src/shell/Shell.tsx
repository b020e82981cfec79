import { Link, Outlet, useRouterState } from '@tanstack/react-router'
import { useState } from 'react'
import { signIn, signOut } from '../auth/session.ts'
import { ROLE_NAMES, useWorkspace } from '../auth/workspace.tsx'
import { applyTheme, storedTheme, type Theme } from '../theme.ts'
import { Button } from '../ui/Button.tsx'
import { SelectInput } from '../ui/Field.tsx'
import { PageHeader } from '../ui/Page.tsx'

const NAV = [
  { to: '/keys', label: 'Keys' },
  { to: '/try', label: 'Try it' },
  { to: '/secrets', label: 'Secrets' },
  { to: '/api-keys', label: 'API keys' },
  { to: '/team', label: 'Team' },
  { to: '/settings', label: 'Settings' },
  { to: '/audit', label: 'Audit log' },
] as const

const THEMES: Array<{ id: Theme; label: string }> = [
  { id: 'system', label: 'System theme' },
  { id: 'light', label: 'Light theme' },
  { id: 'dark', label: 'Dark theme' },
]

/** The tenant switcher: another tenant is a new authorization (silent while the session lasts). */
function TenantSwitcher() {
  const { tenant, me } = useWorkspace()
  const [switching, setSwitching] = useState(false)
  return (
    <div className="tenant-switcher">
      <SelectInput
        label="Tenant"
        value={tenant.id}
        isDisabled={switching}
        options={me.memberships.map((membership) => ({
          id: membership.tenantId,
          label: membership.tenantName,
          description: ROLE_NAMES[membership.role],
        }))}
        onChange={(tenantId) => {
          if (tenantId === tenant.id) return
          setSwitching(true)
          void signIn({ tenantId, returnTo: '/console/keys' })
        }}
      />
    </div>
  )
}

export function Shell() {
  const { tenant, me, role } = useWorkspace()
  const [theme, setTheme] = useState<Theme>(storedTheme)
  const path = useRouterState({ select: (state) => state.location.pathname })
  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link to="/keys" className="brand">
          <span aria-hidden="true" className="brand-mark">
            ◆
          </span>{' '}
          KMS console
        </Link>
        <TenantSwitcher />
        <div className="topbar-right">
          <span className="who">
            <span className="who-email">{me.email}</span>
            {role && <span className="badge">{ROLE_NAMES[role]}</span>}
          </span>
          <SelectInput
            label="Theme"
            value={theme}
            options={THEMES}
            onChange={(value) => {
              const next = value as Theme
              applyTheme(next)
              setTheme(next)
            }}
          />
          <Button variant="quiet" onPress={() => void signOut()}>
            Sign out
          </Button>
        </div>
      </header>
      <div className="body">
        <nav className="sidebar" aria-label="Console">
          <ul>
            {NAV.map((item) => (
              <li key={item.to}>
                <Link
                  to={item.to}
                  className="nav-link"
                  aria-current={
                    path === `/console${item.to}` || path.startsWith(`/console${item.to}/`)
                      ? 'page'
                      : undefined
                  }
                >
                  {item.label}
                </Link>
              </li>
            ))}
          </ul>
          <p className="tenant-id">
            Tenant <code>{tenant.id}</code>
          </p>
        </nav>
        <main id="main" tabIndex={-1}>
          <Outlet />
        </main>
      </div>
    </div>
  )
}

export function NotFound() {
  return (
    <>
      <PageHeader title="Page not found" />
      <p>
        The console has no such page. <Link to="/keys">Go to the keys</Link>.
      </p>
    </>
  )
}
