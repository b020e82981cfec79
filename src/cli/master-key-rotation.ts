import type { MasterKeyring } from '../keyring/master-key.ts'
import { type MasterKeySealed, type RotationSummary, rewrapEverything } from '../keyring/rewrap.ts'
import { rewrapAllKeks } from '../keyring/tenant-kek.ts'
import type { Services } from '../server/compose.ts'

/**
 * Everything sealed under the master keyring, each by the domain that owns it
 * (docs/operations.md "Master key rotation"). A domain that seals something new under the
 * keyring adds itself here, or a rotation leaves it under the old key and the next start without
 * that key breaks it.
 */
function sealedUnderMasterKeys(services: Services): MasterKeySealed[] {
  return [
    {
      what: 'tenant KEKs',
      rewrapSealed: (keyring, progress) =>
        rewrapAllKeks(services.sql, keyring, (p) => progress?.(p.done, p.total)),
    },
    {
      what: 'ID-token signing keys',
      rewrapSealed: (keyring) => services.identity.signingKeys.rewrapSealed(keyring),
    },
    {
      what: 'application client secrets',
      rewrapSealed: (keyring) => services.applications.rewrapSealed(keyring),
    },
    { what: 'partner webhook secrets', rewrapSealed: (keyring) => services.partners.rewrapSealed(keyring) },
    { what: 'TOTP secrets', rewrapSealed: (keyring) => services.accounts.rewrapSealed(keyring) },
    {
      what: 'unsent sign-in codes',
      rewrapSealed: (keyring) => services.identity.codes.rewrapSealed(keyring),
    },
    {
      what: 'unsent account links',
      rewrapSealed: (keyring) => services.identity.links.rewrapSealed(keyring),
    },
    { what: 'unsent invitations', rewrapSealed: (keyring) => services.team.rewrapSealed(keyring) },
    { what: 'unsent sign-up links', rewrapSealed: (keyring) => services.signups.rewrapSealed(keyring) },
    {
      what: 'unsent application sign-up links',
      rewrapSealed: (keyring) => services.endusers.rewrapSealed(keyring),
    },
  ]
}

/** One pass over everything; progress and anything left behind go to `report` (stderr). */
export function rewrapSealed(
  services: Services,
  keyring: MasterKeyring,
  report: (line: string) => void,
): Promise<RotationSummary> {
  return rewrapEverything(sealedUnderMasterKeys(services), keyring, report)
}

/** The command's failure when something could not be re-wrapped: which, and what to do. */
export function unreadableMessage(summary: RotationSummary): string {
  const which = Object.entries(summary.byOwner)
    .filter(([, result]) => result.unreadable > 0)
    .map(([what, result]) => `${result.unreadable} ${what}`)
    .join(', ')
  return (
    `${which} are sealed by master keys this command was not given, and stay as they are: ` +
    'add the missing key (KMS_MASTER_KEY_PREVIOUS, or a line after the first in the key file) and run ' +
    'rotate-master-key again; a key that is lost cannot be recovered (docs/operations.md "Master key rotation")'
  )
}
