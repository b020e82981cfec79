import type { AccountService } from '../identity/accounts/account-service.ts'
import type { Module } from '../platform/module.ts'
import type { Csrf } from '../web/csrf.ts'
import type { PageSettings } from '../web/layout.ts'
import { invitationPages } from './invitation-pages.ts'
import { teamJobs } from './team-jobs.ts'
import { teamRoutes } from './team-routes.ts'
import type { TeamService } from './team-service.ts'

/** Team members, their roles and invitations, with the accept-invitation page. */
export function teamModule(deps: {
  team: TeamService
  accounts: AccountService
  csrf: Csrf
  pageSettings: PageSettings
}): Module {
  return {
    jobs: teamJobs(deps),
    name: 'team',
    routes: teamRoutes(deps.team),
    pages: invitationPages(deps),
  }
}
