import { Dialog, DialogTrigger, Heading, Modal, ModalOverlay } from 'react-aria-components'
import { Button } from '../../ui/Button.tsx'
import { CopyButton } from '../../ui/CopyButton.tsx'
import { type ActorNames, type AuditFilters, type AuditRecord, formatTime } from './audit-data.ts'

export function OutcomeBadge(props: { outcome: AuditRecord['outcome'] }) {
  const tone = { success: 'badge-success', failure: 'badge-danger', denied: 'badge-warning' }[props.outcome]
  const label = { success: 'Success', failure: 'Failure', denied: 'Denied' }[props.outcome]
  return <span className={`badge ${tone}`}>{label}</span>
}

const none = <span className="muted">None</span>

/**
 * Every field of one record, in a dialog opened from its row; the values it can be filtered by
 * set the list's filter in one press.
 */
export function AuditDetails(props: {
  record: AuditRecord
  names: ActorNames
  onFilter(filter: AuditFilters): void
}) {
  const { record } = props
  const name = props.names.get(record.actor)
  return (
    <DialogTrigger>
      <Button variant="quiet" aria-label={`Details of ${record.action} at ${formatTime(record.occurredAt)}`}>
        Details
      </Button>
      <ModalOverlay className="modal-overlay" isDismissable>
        <Modal className="modal audit-modal">
          <Dialog className="dialog">
            {({ close }) => (
              <>
                <Heading slot="title">Audit record {record.id}</Heading>
                <dl className="dl audit-details">
                  <dt>Time</dt>
                  <dd>
                    <time dateTime={record.occurredAt}>{formatTime(record.occurredAt)}</time>{' '}
                    <span className="muted mono">({record.occurredAt})</span>
                  </dd>
                  <dt>Actor</dt>
                  <dd>
                    {name && <>{name} </>}
                    <code>{record.actor}</code>
                  </dd>
                  <dt>Action</dt>
                  <dd>
                    <code>{record.action}</code>
                  </dd>
                  <dt>Resource</dt>
                  <dd>{record.resource ? <code>{record.resource}</code> : none}</dd>
                  <dt>Key version</dt>
                  <dd>{record.keyVersion ?? none}</dd>
                  <dt>Outcome</dt>
                  <dd>
                    <OutcomeBadge outcome={record.outcome} />
                  </dd>
                  <dt>Request id</dt>
                  <dd>{record.requestId ? <code>{record.requestId}</code> : none}</dd>
                  <dt>Client IP</dt>
                  <dd>{record.clientIp ? <code>{record.clientIp}</code> : none}</dd>
                  <dt>Record id</dt>
                  <dd>
                    <code>{record.id}</code>
                  </dd>
                </dl>
                <h3>Details</h3>
                {record.details && Object.keys(record.details).length > 0 ? (
                  <pre className="audit-json">
                    <code>{JSON.stringify(record.details, null, 2)}</code>
                  </pre>
                ) : (
                  <p className="muted">This record has no details.</p>
                )}
                <div className="row audit-dialog-actions">
                  <Button
                    onPress={() => {
                      close()
                      props.onFilter({ action: record.action })
                    }}
                  >
                    Show only this action
                  </Button>
                  <Button
                    onPress={() => {
                      close()
                      props.onFilter({ actor: record.actor })
                    }}
                  >
                    Show only this actor
                  </Button>
                  {record.resource && (
                    <Button
                      onPress={() => {
                        close()
                        props.onFilter({ resource: record.resource ?? undefined })
                      }}
                    >
                      Show only this resource
                    </Button>
                  )}
                  <CopyButton value={JSON.stringify(record)} label="Copy as JSON" />
                  <Button variant="primary" onPress={close} className="audit-close">
                    Close
                  </Button>
                </div>
              </>
            )}
          </Dialog>
        </Modal>
      </ModalOverlay>
    </DialogTrigger>
  )
}
