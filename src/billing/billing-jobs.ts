import type { ModuleJobs } from '../platform/module.ts'
import type { BillingService } from './billing-service.ts'

/**
 * `billing-sweep` (maintenance): folds the operations audited since the last fold into the usage
 * totals (the audit feed: exact, once each, whichever sweep gets there), and issues last month's
 * invoices, once per tenant (the unique key).
 */
export function billingJobs(deps: {
  billing: Pick<BillingService, 'foldUsage' | 'issueInvoices'>
}): ModuleJobs {
  return {
    sweeps: [
      {
        name: 'billing-sweep',
        queue: 'maintenance',
        async run() {
          const foldedUsage = await deps.billing.foldUsage()
          const invoices = await deps.billing.issueInvoices()
          return {
            // Folding runs at every sweep: only issued invoices are worth a line.
            worked: invoices.issued > 0,
            message: 'invoices issued',
            details: { period: invoices.period, issued: invoices.issued, foldedUsage },
          }
        },
      },
    ],
  }
}
