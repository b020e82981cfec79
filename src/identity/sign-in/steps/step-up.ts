import type { Interaction } from 'oidc-provider'
import { GATE_REASON } from '../../oidc/oidc-provider.ts'
import type { ProvenLogin } from './interaction.ts'

/**
 * A remembered login this authorization asks more of (a factor, a policy, a membership): the
 * provider's own gate check (oidc-provider.ts) sent the person here, and it is the only reason.
 * No password again: the session's account and methods go to the gate, marked as a step-up.
 */
export function rememberedLogin(interaction: Interaction): ProvenLogin | undefined {
  const remembered = interaction.session?.accountId
  const reasons = interaction.prompt.reasons
  if (!remembered || reasons.length !== 1 || reasons[0] !== GATE_REASON) return undefined
  return { accountId: remembered, amr: interaction.session?.amr ?? [], proven: [], stepUp: true }
}
