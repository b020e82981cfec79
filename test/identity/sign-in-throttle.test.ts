import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createAccountService, THROTTLE } from '../../src/identity/accounts/account-service.ts'
import { loadMasterKeyring } from '../../src/keyring/master-key.ts'
import { createLogger } from '../../src/platform/logger.ts'
import { manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TestService } from '../helpers/service.ts'
import { type ConsoleClient, consoleClient, signIn } from '../helpers/sign-in.ts'

const REDIRECT = 'http://127.0.0.1:9/callback'

describe('sign-in throttling and lock-out', () => {
  let service: TestService
  let client: ConsoleClient
  before(async () => {
    service = await startTestService({ KMS_CONSOLE_REDIRECT_URIS: REDIRECT })
    client = await consoleClient(service.baseUrl, REDIRECT)
  })
  after(() => service.stop())

  const accountsWith = (clock = manualClock()) => ({
    clock,
    accounts: createAccountService({
      sql: service.sql,
      masterKeys: loadMasterKeyring(service.config, createLogger('silent', 'test')).keyring,
      clock,
    }),
  })

  test('five wrong passwords from one address lock that address out of that account; the owner elsewhere signs in; the lock ends', async () => {
    const { accounts, clock } = accountsWith()
    await accounts.createTeamAccount({ email: 'victim@example.com', password: 'the right password' })
    const attacker = '203.0.113.7'
    for (let i = 0; i < THROTTLE.perAccountLimit; i++) {
      assert.equal(
        (await accounts.signIn({ email: 'victim@example.com', password: `guess ${i}`, clientIp: attacker }))
          .outcome,
        'invalid',
      )
    }
    // Locked for the attacker, even with the right password.
    const locked = await accounts.signIn({
      email: 'victim@example.com',
      password: 'the right password',
      clientIp: attacker,
    })
    assert.equal(locked.outcome, 'locked')
    assert.ok(
      locked.outcome === 'locked' &&
        locked.retryAfterSeconds > 0 &&
        locked.retryAfterSeconds <= THROTTLE.lockMs / 1000,
    )
    // The owner, from their own address, is not locked out.
    assert.equal(
      (
        await accounts.signIn({
          email: 'victim@example.com',
          password: 'the right password',
          clientIp: '198.51.100.20',
        })
      ).outcome,
      'ok',
    )
    // The lock is bounded: after it, the attacker is back to guessing (and locking itself again).
    clock.advance(THROTTLE.lockMs + 1000)
    assert.equal(
      (await accounts.signIn({ email: 'victim@example.com', password: 'guess again', clientIp: attacker }))
        .outcome,
      'invalid',
    )
  })

  test('an address spraying many accounts is locked for all of them', async () => {
    const { accounts } = accountsWith()
    const sprayer = '203.0.113.99'
    for (let i = 0; i < THROTTLE.perAddressLimit; i++) {
      await accounts.signIn({ email: `user${i}@example.com`, password: 'Summer2026!', clientIp: sprayer })
    }
    assert.equal(
      (await accounts.signIn({ email: 'someone-else@example.com', password: 'x', clientIp: sprayer }))
        .outcome,
      'locked',
    )
    assert.equal(
      (await accounts.signIn({ email: 'someone-else@example.com', password: 'x', clientIp: '198.51.100.21' }))
        .outcome,
      'invalid',
    )
  })

  test('an unknown address and a wrong password read the same; a success clears the count', async () => {
    const { accounts } = accountsWith()
    await accounts.createTeamAccount({ email: 'clear@example.com', password: 'the right password' })
    const ip = '192.0.2.1'
    assert.deepEqual(
      await accounts.signIn({ email: 'nobody@example.com', password: 'whatever password', clientIp: ip }),
      { outcome: 'invalid' },
    )
    for (let i = 0; i < THROTTLE.perAccountLimit - 1; i++)
      await accounts.signIn({ email: 'clear@example.com', password: 'wrong', clientIp: ip })
    assert.equal(
      (await accounts.signIn({ email: 'clear@example.com', password: 'the right password', clientIp: ip }))
        .outcome,
      'ok',
    )
    // Counting starts again from zero.
    for (let i = 0; i < THROTTLE.perAccountLimit - 1; i++)
      await accounts.signIn({ email: 'clear@example.com', password: 'wrong', clientIp: ip })
    assert.equal(
      (await accounts.signIn({ email: 'clear@example.com', password: 'the right password', clientIp: ip }))
        .outcome,
      'ok',
    )
  })

  test('the page answers 429 with the lock message after five wrong passwords from the browser’s address', async () => {
    await service.api.services.accounts.createTeamAccount({
      email: 'paged@example.com',
      password: 'the right password',
    })
    for (let i = 0; i < THROTTLE.perAccountLimit; i++) {
      await assert.rejects(
        signIn(service.baseUrl, client, { email: 'paged@example.com', password: `wrong ${i}` }),
        /not right/,
      )
    }
    await assert.rejects(
      signIn(service.baseUrl, client, { email: 'paged@example.com', password: 'the right password' }),
      /Too many attempts/,
    )
  })
})
