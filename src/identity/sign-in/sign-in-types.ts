import type { MembershipRoles } from '../../auth/bearer-authenticator.ts'
import type { LoginPanel } from '../../branding/login-panel.ts'
import type { TenantService } from '../../tenants/tenant-service.ts'
import type { Csrf } from '../../web/csrf.ts'
import type { PageSettings } from '../../web/layout.ts'
import type { AccountService } from '../accounts/account-service.ts'
import type { OneTimeCodes } from '../accounts/one-time-codes.ts'
import type { ClientDirectory, OidcRuntime } from '../oidc/oidc-provider.ts'
import type { AuthorizationGate } from './authorization-gate.ts'
import type { SignInEvents } from './sign-in-events.ts'

/*
 * What the sign-in pages need of other modules, apart from the pages themselves: a module that
 * provides one of these (or the composition that wires them) imports a type, not the routes.
 */

/** The tenant's login panel (src/settings), the fallback of applications that set none. */
export interface TenantBranding {
  panelOf(tenantId: string): Promise<LoginPanel>
}

/** What the sign-in pages need of the end-users module (joining an application's list is the gate's). */
interface EndUserSignIns {
  /** Sign-up: the same outcome on the page whether the address is new, known or blocked. */
  signUp(input: { tenantId: string; applicationId: string; email: string; clientIp: string }): Promise<void>
  /** Sign-up's bound per client address (429 page), asked before `signUp`. */
  admitSignUp(clientIp: string): Promise<{ admitted: true } | { admitted: false; retryAfterSeconds: number }>
}

/**
 * Access policies (src/access-policies): the gate decides; the waiting page reads the access
 * request a policy opened, until a team member decides.
 */
export interface SignInAccessPolicy {
  requestFor(
    tenantId: string,
    requestId: string,
    accountId: string,
  ): Promise<{ status: 'pending' | 'approved' | 'rejected' | 'expired' } | undefined>
}

/** External identity providers (src/federation) an application's sign-in page offers. */
export interface SignInFederation {
  providersFor(tenantId: string, applicationId: string): Promise<Array<{ id: string; name: string }>>
  /** The IdP's URL carrying a new AuthnRequest bound to this sign-in; undefined: not offered here. */
  startUrl(input: {
    idpId: string
    tenantId: string
    applicationId: string
    interactionUid: string
  }): Promise<string | undefined>
  /** The account an accepted response signed in, taken once by the sign-in that asked. */
  takeResult(requestId: string, interactionUid: string): Promise<{ accountId: string } | undefined>
}

export interface SignInDeps {
  oidc: OidcRuntime
  clients: ClientDirectory
  endUsers: EndUserSignIns
  accounts: AccountService
  codes: OneTimeCodes
  csrf: Csrf
  pageSettings: PageSettings
  /** What every authorization checks (src/identity/sign-in/authorization-gate.ts). */
  gate: AuthorizationGate
  signIns: SignInEvents
  /** The tenant a command line sign-in is for, named on its confirmation page (to a member only). */
  tenants: Pick<TenantService, 'get'>
  memberships: Pick<MembershipRoles, 'roleOf'>
  branding?: TenantBranding
  accessPolicy?: SignInAccessPolicy
  federation?: SignInFederation
  /** The name shown in authenticator apps. */
  issuerName: string
}
