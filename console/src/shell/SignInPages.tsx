import { useEffect } from 'react'
import { lastTenant, type SignInError, signIn } from '../auth/session.ts'
import { Button } from '../ui/Button.tsx'

function Centered(props: { title: string; children?: React.ReactNode }) {
  useEffect(() => {
    document.title = `${props.title} · KMS console`
  }, [props.title])
  return (
    <main className="centered">
      <div className="card">
        <h1>{props.title}</h1>
        {props.children}
      </div>
    </main>
  )
}

export function Starting() {
  return (
    <Centered title="KMS console">
      <p role="status">Signing in…</p>
    </Centered>
  )
}

export function SignedOut() {
  return (
    <Centered title="Signed out">
      <p>You are signed out of the console.</p>
      <Button
        variant="primary"
        onPress={() => void signIn({ tenantId: lastTenant(), returnTo: '/console/keys' })}
      >
        Sign in again
      </Button>
    </Centered>
  )
}

/** A sign-in that did not complete (refused, not a member, an expired link): what happened, and a way on. */
export function SignInProblem(props: { error: SignInError }) {
  return (
    <Centered title="Sign-in did not complete">
      <p role="alert">
        {props.error.message} <span className="code-badge">({props.error.code})</span>
      </p>
      <div className="row">
        <Button
          variant="primary"
          onPress={() => void signIn({ tenantId: lastTenant(), returnTo: '/console/keys' })}
        >
          Try again
        </Button>
        <Button onPress={() => void signIn({ returnTo: '/console/keys' })}>Sign in without a tenant</Button>
      </div>
    </Centered>
  )
}
