import { useQuery } from '@tanstack/react-query'
import { getRouteApi, Link, useNavigate } from '@tanstack/react-router'
import { useState } from 'react'
import { Tab, TabList, TabPanel, Tabs } from 'react-aria-components'
import { api, must, type Schemas } from '../../api/client.ts'
import type { TrySearch } from '../../search.ts'
import { ErrorAlert } from '../../ui/Alert.tsx'
import { SelectInput } from '../../ui/Field.tsx'
import { Empty, Loading, PageHeader } from '../../ui/Page.tsx'
import {
  DataKeyPanel,
  type DecryptInput,
  DecryptPanel,
  EncryptPanel,
  MacPanel,
  SignPanel,
  type VerifyInput,
  VerifyPanel,
} from './operations.tsx'

const route = getRouteApi('/try')

type Key = Schemas['KeyView']
type Op = NonNullable<TrySearch['op']>

/** What each type of key does (docs/crypto-operations.md): the tabs offered for it. */
const OPS_OF_TYPE: Record<Key['keyType'], readonly Op[]> = {
  Encryption: ['encrypt', 'decrypt', 'data-key'],
  Signing: ['sign', 'verify'],
  HMAC: ['mac'],
}
const OP_LABELS: Record<Op, string> = {
  encrypt: 'Encrypt',
  decrypt: 'Decrypt',
  sign: 'Sign',
  verify: 'Verify',
  mac: 'MAC',
  'data-key': 'Data key',
}

/** Keys that can still do something: a Destroyed key can do nothing at all. */
const USABLE_STATES: Array<Key['state']> = ['Active', 'Expired', 'Revoked', 'Pending Deletion']

function stateBadge(state: Key['state']) {
  const tone = state === 'Active' ? 'badge-success' : state === 'Expired' ? 'badge-warning' : 'badge-danger'
  return <span className={`badge ${tone}`}>{state}</span>
}

export function TryItPage() {
  const { keyId, op } = route.useSearch()
  const navigate = useNavigate({ from: '/try' })
  const keys = useQuery({
    queryKey: ['try', 'keys'],
    queryFn: async () =>
      must(
        await api.GET('/api/v1/keys', {
          params: { query: { sort: 'name', order: 'asc', limit: 1000, status: USABLE_STATES } },
        }),
      ),
  })
  const chosen = useQuery({
    queryKey: ['try', 'key', keyId],
    enabled: keyId !== undefined,
    queryFn: async () => must(await api.GET('/api/v1/keys/{keyId}', { params: { path: { keyId: keyId! } } })),
  })
  const listed = keys.data?.data ?? []
  const key = chosen.data
  // A key named by the URL but beyond the first 1,000 (or Destroyed) is still offered.
  const options = [...listed, ...(key && !listed.some((item) => item.id === key.id) ? [key] : [])].map(
    (item) => ({
      id: item.id,
      label: item.name,
      description: `${item.algorithm} · ${item.keyType}${item.state === 'Active' ? '' : ` · ${item.state}`}`,
    }),
  )

  return (
    <>
      <PageHeader
        title="Try it"
        description="Run encrypt, decrypt, sign, verify, MAC and data-key operations with one of your keys, and see the exact API request for each."
      />
      <section className="section" aria-labelledby="try-key-heading">
        <h2 id="try-key-heading" className="try-heading">
          Choose a key
        </h2>
        {keys.isPending ? (
          <Loading what="keys" />
        ) : keys.error ? (
          <ErrorAlert error={keys.error} title="The keys could not be listed" />
        ) : options.length === 0 ? (
          <Empty>
            No key to try yet. <Link to="/keys/new">Create a key</Link> first: an Encryption key to encrypt
            and make data keys, a Signing key to sign, an HMAC key for MACs.
          </Empty>
        ) : (
          <div className="try-key-row">
            <SelectInput
              label="Key"
              placeholder="Choose a key"
              description="The operations offered follow the key's type."
              value={keyId ?? null}
              options={options}
              onChange={(id) => navigate({ search: { keyId: id } })}
            />
            {key && (
              <dl className="dl try-key-facts">
                <dt>Algorithm</dt>
                <dd>
                  {key.algorithm} ({key.keyType})
                </dd>
                <dt>State</dt>
                <dd>{stateBadge(key.state)}</dd>
                <dt>Current version</dt>
                <dd>{key.version}</dd>
                <dt>Details</dt>
                <dd>
                  <Link to="/keys/$keyId" params={{ keyId: key.id }}>
                    Open the key
                  </Link>
                </dd>
              </dl>
            )}
          </div>
        )}
        {keyId && chosen.error && <ErrorAlert error={chosen.error} title="The key could not be read" />}
        {keyId && chosen.isPending && <Loading what="the key" />}
      </section>
      {key && (
        <KeyOperations
          key={key.id}
          keyView={key}
          op={op}
          onOp={(next) => navigate({ search: (prev) => ({ ...prev, op: next }) })}
        />
      )}
    </>
  )
}

/**
 * The operations of one key, as tabs (the tab is `op` in the URL). Every panel stays mounted, so
 * a form and its answer survive switching tabs; "Decrypt this" and "Verify this" fill the
 * receiving form from an answer.
 */
function KeyOperations(props: { keyView: Key; op: Op | undefined; onOp(op: Op): void }) {
  const { keyView } = props
  const ops = OPS_OF_TYPE[keyView.keyType]
  const current = props.op !== undefined && ops.includes(props.op) ? props.op : ops[0]!
  const [decryptInput, setDecryptInput] = useState<DecryptInput>({ answer: '', context: '' })
  // How many answers were carried over: the receiving panel then takes the focus.
  const [carried, setCarried] = useState(0)
  const [verifyInput, setVerifyInput] = useState<VerifyInput>({
    message: '',
    signature: '',
    keyVersion: '',
    rsaPadding: 'PSS',
    signatureFormat: 'DER',
  })
  return (
    <Tabs
      className="try-tabs"
      selectedKey={current}
      onSelectionChange={(selected) => props.onOp(String(selected) as Op)}
    >
      <TabList aria-label={`Operations with ${keyView.name}`} className="tabs">
        {ops.map((item) => (
          <Tab key={item} id={item} className="tab">
            {OP_LABELS[item]}
          </Tab>
        ))}
      </TabList>
      {ops.includes('encrypt') && (
        <TabPanel id="encrypt" shouldForceMount className="try-panel">
          <EncryptPanel
            keyView={keyView}
            onDecrypt={(input) => {
              setDecryptInput(input)
              setCarried(carried + 1)
              props.onOp('decrypt')
            }}
          />
        </TabPanel>
      )}
      {ops.includes('decrypt') && (
        <TabPanel id="decrypt" shouldForceMount className="try-panel">
          <DecryptPanel
            keyView={keyView}
            input={decryptInput}
            active={current === 'decrypt'}
            carried={carried}
            onInput={setDecryptInput}
          />
        </TabPanel>
      )}
      {ops.includes('data-key') && (
        <TabPanel id="data-key" shouldForceMount className="try-panel">
          <DataKeyPanel keyView={keyView} />
        </TabPanel>
      )}
      {ops.includes('sign') && (
        <TabPanel id="sign" shouldForceMount className="try-panel">
          <SignPanel
            keyView={keyView}
            onVerify={(input) => {
              setVerifyInput(input)
              setCarried(carried + 1)
              props.onOp('verify')
            }}
          />
        </TabPanel>
      )}
      {ops.includes('verify') && (
        <TabPanel id="verify" shouldForceMount className="try-panel">
          <VerifyPanel
            keyView={keyView}
            input={verifyInput}
            active={current === 'verify'}
            carried={carried}
            onInput={setVerifyInput}
          />
        </TabPanel>
      )}
      {ops.includes('mac') && (
        <TabPanel id="mac" shouldForceMount className="try-panel">
          <MacPanel keyView={keyView} />
        </TabPanel>
      )}
    </Tabs>
  )
}
