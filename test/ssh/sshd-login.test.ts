import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, rmdirSync } from 'node:fs'
import { connect, createServer } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { manualClock } from '../helpers/manual-clock.ts'
import { startTestService, type TenantWithKey, type TestService, waitFor } from '../helpers/service.ts'
import { type KeyPair, keygen, type TempDir, tempDir } from './ssh-tools.ts'

/**
 * The acceptance of the SSH CA (docs/ssh.md) with Debian's real OpenSSH: an sshd started here as
 * root on a loopback port, in a temporary directory with its own host key, trusting the
 * service's user CA (`TrustedUserCAKeys`, fetched from the public URL), with
 * `AuthorizedPrincipalsFile` naming the principal root's logins need and `RevokedKeys` the KRL
 * fetched from the service. `ssh -o BatchMode=yes` logs in with a certificate for the right
 * principal, and is refused with one for another principal, an expired one and a revoked one;
 * the host presents a host certificate the client accepts through a `@cert-authority` line in
 * known_hosts with StrictHostKeyChecking=yes. scripts/ensure-openssh.sh installs OpenSSH.
 */

const SSHD = process.env['KMS_SSHD'] ?? '/usr/sbin/sshd'
/** The principal root's logins need (AuthorizedPrincipalsFile). */
const PRINCIPAL = 'ops'
/** sshd's privilege separation directory: it refuses to start without one. */
const PRIVSEP_DIR = '/run/sshd'

const clock = manualClock(new Date(Math.floor(Date.now() / 1000) * 1000))
let svc: TestService
let tenant: TenantWithKey
let dir: TempDir
let sshd: ChildProcess | undefined
let sshdLog = ''
let port = 0
let createdPrivsepDir = false
let userCa: { id: string; publicKey: string; krlUrl: string; publicKeyUrl: string }
let hostCa: { id: string; knownHostsLine: string }
let client: KeyPair

async function api(method: string, path: string, body?: unknown, who: TenantWithKey = tenant) {
  const res = await svc.request(method, `/api/v1${path}`, {
    key: who.key,
    ...(body === undefined ? {} : { body }),
  })
  assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`)
  return res.body
}

/** Signs the client key (or `publicKey`) and writes the certificate where ssh -o CertificateFile finds it. */
async function certificateFor(
  name: string,
  body: Record<string, unknown>,
  who: TenantWithKey = tenant,
): Promise<{ id: string; file: string }> {
  const certificate = await api('POST', '/ssh/certificates', { publicKey: client.publicLine, ...body }, who)
  return { id: certificate.id, file: dir.file(`${name}-cert.pub`, `${certificate.certificate}\n`) }
}

/** The public URL's bytes, written to `file` in the temporary directory. */
async function download(url: string, file: string): Promise<string> {
  const response = await fetch(new URL(url, svc.baseUrl))
  assert.equal(response.status, 200, url)
  return dir.file(file, Buffer.from(await response.arrayBuffer()))
}

interface SshResult {
  code: number
  stdout: string
  stderr: string
}

function ssh(options: {
  key: KeyPair
  certificate: string
  knownHosts?: string
  command?: string
}): Promise<SshResult> {
  const hostChecking = options.knownHosts
    ? ['-o', 'StrictHostKeyChecking=yes', '-o', `UserKnownHostsFile=${options.knownHosts}`]
    : ['-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null']
  const args = [
    '-F',
    '/dev/null',
    '-p',
    String(port),
    '-i',
    options.key.path,
    '-o',
    `CertificateFile=${options.certificate}`,
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    'IdentityAgent=none',
    '-o',
    'BatchMode=yes',
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    '-o',
    'ConnectTimeout=20',
    '-o',
    'LogLevel=ERROR',
    ...hostChecking,
    'root@127.0.0.1',
    options.command ?? 'echo logged-in',
  ]
  return new Promise((resolve) => {
    execFile('ssh', args, { encoding: 'utf8', timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 255) : 0
      resolve({ code, stdout, stderr })
    })
  })
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

/** Whether something on the port answers with an SSH banner. */
function answersSsh(): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    let text = ''
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(2000, () => done(false))
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1')
      if (text.includes('\n')) done(text.startsWith('SSH-2.0-'))
    })
    socket.on('error', () => done(false))
  })
}

async function startSshd(config: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    port = await freePort()
    const configFile = dir.file('sshd_config', config.replace('@PORT@', String(port)))
    sshdLog = ''
    const child = spawn(SSHD, ['-D', '-e', '-f', configFile], { stdio: ['ignore', 'pipe', 'pipe'] })
    sshd = child
    child.stdout!.on('data', (chunk: Buffer) => {
      sshdLog += chunk.toString()
    })
    child.stderr!.on('data', (chunk: Buffer) => {
      sshdLog += chunk.toString()
    })
    try {
      await waitFor(async () => {
        if (child.exitCode !== null) throw new Error(`sshd exited with ${child.exitCode}:\n${sshdLog}`)
        return answersSsh()
      }, `sshd listening on 127.0.0.1:${port}`)
      return
    } catch (error) {
      // Another process took the port between the probe and sshd's bind: try another.
      if (attempt >= 3 || !/Address already in use/.test(sshdLog)) throw error
    }
  }
}

async function stopSshd(): Promise<void> {
  const child = sshd
  sshd = undefined
  if (!child || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  await exited
}

before(async () => {
  assert.ok(existsSync(SSHD), `${SSHD} is missing: run scripts/ensure-openssh.sh`)
  assert.equal(process.getuid?.(), 0, 'sshd runs as root to log a user in')
  svc = await startTestService({}, { clock })
  tenant = await svc.createTenant()
  dir = tempDir('kms-sshd-')
  userCa = await api('POST', '/ssh/ca', { type: 'user', algorithm: 'EC-P256' })
  hostCa = await api('POST', '/ssh/ca', { type: 'host', algorithm: 'Ed25519' })
  client = keygen(dir, 'client', 'ed25519')

  // The host key and its certificate, signed by the service's host CA.
  const hostKey = keygen(dir, 'ssh_host_ed25519_key', 'ed25519')
  const hostCertificate = await api('POST', '/ssh/certificates', {
    caId: hostCa.id,
    publicKey: hostKey.publicLine,
    principals: ['127.0.0.1', 'localhost'],
  })
  dir.file('ssh_host_ed25519_key-cert.pub', `${hostCertificate.certificate}\n`)

  const trusted = await download(userCa.publicKeyUrl, 'trusted_user_ca_keys')
  const krl = await download(userCa.krlUrl, 'revoked.krl')
  mkdirSync(`${dir.path}/principals`)
  dir.file('principals/root', `${PRINCIPAL}\n`)
  if (!existsSync(PRIVSEP_DIR)) {
    mkdirSync(PRIVSEP_DIR, { recursive: true, mode: 0o755 })
    createdPrivsepDir = true
  }
  await startSshd(
    [
      'Port @PORT@',
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey.path}`,
      `HostCertificate ${hostKey.path}-cert.pub`,
      `PidFile ${dir.path}/sshd.pid`,
      `TrustedUserCAKeys ${trusted}`,
      `AuthorizedPrincipalsFile ${dir.path}/principals/%u`,
      `RevokedKeys ${krl}`,
      'AuthorizedKeysFile none',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      // No PAM: its session modules (pam_loginuid) fail in containers.
      'UsePAM no',
      // The temporary directory is not a home directory: no owner checks on it.
      'StrictModes no',
      'LogLevel VERBOSE',
      '',
    ].join('\n'),
  )
})

after(async () => {
  await stopSshd()
  await svc?.stop()
  dir?.remove()
  if (createdPrivsepDir && existsSync(PRIVSEP_DIR) && readdirSync(PRIVSEP_DIR).length === 0)
    rmdirSync(PRIVSEP_DIR)
})

/**
 * Runs `work` (an ssh login), then waits until sshd has logged a line matching `expected` since
 * it started: sshd may write its verdict just after the client has gone.
 */
async function withSshdLog<T>(work: () => Promise<T>, expected: RegExp): Promise<{ result: T; log: string }> {
  const start = sshdLog.length
  const result = await work()
  await waitFor(() => expected.test(sshdLog.slice(start)), `sshd to log ${expected}`).catch(() => {
    throw new Error(`sshd did not log ${expected}:\n${sshdLog.slice(start)}`)
  })
  return { result, log: sshdLog.slice(start) }
}

describe('sshd trusts the service’s user CA', () => {
  test('a certificate for the right principal logs in', async () => {
    const { file } = await certificateFor('right', { caId: userCa.id, principals: [PRINCIPAL] })
    const { result } = await withSshdLog(
      () => ssh({ key: client, certificate: file }),
      /Accepted publickey for root .* ED25519-CERT .* CA ECDSA/,
    )
    assert.equal(result.code, 0, `${result.stderr}\n${sshdLog}`)
    assert.equal(result.stdout.trim(), 'logged-in')
  })

  test('a certificate for another principal is refused', async () => {
    const { file } = await certificateFor('wrong', { caId: userCa.id, principals: ['dev'] })
    const { result, log } = await withSshdLog(
      () => ssh({ key: client, certificate: file }),
      /Certificate does not contain an authorized principal/,
    )
    assert.equal(result.code, 255, result.stdout)
    assert.match(result.stderr, /Permission denied/)
    assert.doesNotMatch(log, /Accepted publickey/)
  })

  test('an expired certificate is refused', async () => {
    const now = clock.now()
    let file = ''
    try {
      // Issued two days ago for an hour: expired by now.
      clock.set(new Date(now.getTime() - 2 * 24 * 3600 * 1000))
      ;({ file } = await certificateFor('expired', {
        caId: userCa.id,
        principals: [PRINCIPAL],
        validitySeconds: 3600,
      }))
    } finally {
      clock.set(now)
    }
    const { result, log } = await withSshdLog(
      () => ssh({ key: client, certificate: file }),
      /Certificate invalid: expired/,
    )
    assert.equal(result.code, 255, result.stdout)
    assert.match(result.stderr, /Permission denied/)
    assert.doesNotMatch(log, /Accepted publickey/)
  })

  test('a revoked certificate is refused once sshd reads the KRL', async () => {
    const { id, file } = await certificateFor('revoked', { caId: userCa.id, principals: [PRINCIPAL] })
    const before = await ssh({ key: client, certificate: file })
    assert.equal(before.code, 0, `accepted before its revocation: ${before.stderr}`)
    await api('POST', `/ssh/certificates/${id}/revoke`, { reason: 'key compromised' })
    // sshd reads RevokedKeys at each authentication: the new KRL takes effect at once.
    await download(userCa.krlUrl, 'revoked.krl')
    const { result, log } = await withSshdLog(
      () => ssh({ key: client, certificate: file }),
      /ED25519-CERT .* revoked by file .*revoked\.krl/,
    )
    assert.equal(result.code, 255, result.stdout)
    assert.match(result.stderr, /Permission denied/)
    assert.doesNotMatch(log, /Accepted publickey/)
    // Another certificate of the same key and CA still logs in: the KRL names the serial.
    const { file: fresh } = await certificateFor('after-revocation', {
      caId: userCa.id,
      principals: [PRINCIPAL],
    })
    assert.equal((await ssh({ key: client, certificate: fresh })).code, 0)
  })

  test('CAs on Ed25519, EC-P384, EC-P521 and RSA-2048 sign certificates sshd accepts, for each key type', async () => {
    const cases: [string, string, number | undefined][] = [
      ['Ed25519', 'rsa', 2048],
      ['EC-P384', 'ecdsa', 521],
      ['EC-P521', 'ecdsa', 256],
      ['RSA-2048', 'ed25519', undefined],
    ]
    const trusted: string[] = [userCa.publicKey]
    for (const [algorithm, keyType, bits] of cases) {
      const other = await svc.createTenant()
      const ca = await api('POST', '/ssh/ca', { type: 'user', algorithm }, other)
      trusted.push(ca.publicKey)
      // sshd reads TrustedUserCAKeys at each authentication.
      dir.file('trusted_user_ca_keys', `${trusted.join('\n')}\n`)
      const key = keygen(dir, `client-${algorithm}`, keyType, bits)
      const certificate = await api(
        'POST',
        '/ssh/certificates',
        { caId: ca.id, publicKey: key.publicLine, principals: [PRINCIPAL] },
        other,
      )
      const file = dir.file(`client-${algorithm}-cert.pub`, `${certificate.certificate}\n`)
      const result = await ssh({ key, certificate: file })
      assert.equal(
        result.code,
        0,
        `${algorithm} CA, ${keyType} key: ${result.stderr}\n${sshdLog.slice(-2000)}`,
      )
      assert.equal(result.stdout.trim(), 'logged-in')
    }
  })

  test('a certificate of a CA sshd does not trust is refused', async () => {
    const other = await svc.createTenant()
    const otherCa = await api('POST', '/ssh/ca', { type: 'user', algorithm: 'EC-P256' }, other)
    const { file } = await certificateFor('untrusted', { caId: otherCa.id, principals: [PRINCIPAL] }, other)
    const result = await ssh({ key: client, certificate: file })
    assert.equal(result.code, 255, result.stdout)
    assert.match(result.stderr, /Permission denied/)
  })
})

describe('ssh trusts the service’s host CA', () => {
  test('the host certificate is accepted through a @cert-authority line with StrictHostKeyChecking=yes', async () => {
    const { file } = await certificateFor('host-check', { caId: userCa.id, principals: [PRINCIPAL] })
    const knownHosts = dir.file('known_hosts', `${hostCa.knownHostsLine}\n`)
    const result = await ssh({ key: client, certificate: file, knownHosts })
    assert.equal(result.code, 0, result.stderr)
    assert.equal(result.stdout.trim(), 'logged-in')
    // Without the line (another CA's key in its place) the same host is refused.
    const wrong = dir.file('known_hosts_wrong', `@cert-authority * ${userCa.publicKey}\n`)
    const refused = await ssh({ key: client, certificate: file, knownHosts: wrong })
    assert.equal(refused.code, 255)
    assert.match(refused.stderr, /Host key verification failed/)
  })
})
