import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { connect, createServer } from 'node:tls'
import { fileURLToPath } from 'node:url'

/**
 * TLS peers in processes of their own (a server and a client that never share the test's
 * process, its OpenSSL state or its trust store): this file spawns itself with `server` or
 * `client`, hands the material over on stdin as one JSON document and reads one JSON line back.
 * Node's TLS is OpenSSL's: what the client accepts or refuses is OpenSSL's verdict, not ours.
 */

export interface TlsServerMaterial {
  /** PKCS#8 PEM of the leaf's private key. */
  key: string
  /** The leaf certificate then the intermediates (PEM), as a server presents its chain. */
  certificateChain: string
}

export interface TlsClientOptions {
  port: number
  /** SNI and the name checked against the certificate's SANs. */
  servername: string
  /** The trust anchors (PEM); absent: Node's bundled public roots. */
  ca?: string[]
  /** CRLs (PEM). When present Node sets X509_V_FLAG_CRL_CHECK | CRL_CHECK_ALL: every certificate of the chain is checked. */
  crl?: string[]
}

export type TlsClientOutcome =
  | { authorized: true; greeting: string; peerSerial: string }
  | { authorized: false; code: string; message: string }

const SELF = fileURLToPath(import.meta.url)
const GREETING = 'hello over TLS'
/** A peer that says nothing for this long is stuck: the test fails rather than hangs. */
const PEER_TIMEOUT_MS = 30_000

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

function runServer(material: TlsServerMaterial): void {
  const server = createServer({ key: material.key, cert: material.certificateChain }, (socket) => {
    socket.end(`${GREETING}\n`)
  })
  // A refused handshake is an error on the server side too; it is the client's verdict we report.
  server.on('tlsClientError', () => {})
  server.listen(0, '127.0.0.1', () => {
    const address = server.address()
    const port = typeof address === 'object' && address ? address.port : 0
    process.stdout.write(`${JSON.stringify({ port })}\n`)
  })
}

function runClient(options: TlsClientOptions): void {
  const report = (outcome: TlsClientOutcome) => {
    process.stdout.write(`${JSON.stringify(outcome)}\n`)
    process.exit(0)
  }
  const socket = connect({
    host: '127.0.0.1',
    port: options.port,
    servername: options.servername,
    ...(options.ca ? { ca: options.ca } : {}),
    ...(options.crl ? { crl: options.crl } : {}),
    // The default, spelled out: an unverified chain (or a revoked certificate) ends the handshake.
    rejectUnauthorized: true,
  })
  let received = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => {
    received += chunk
  })
  socket.on('end', () => {
    report({
      authorized: true,
      greeting: received.trim(),
      peerSerial: socket.getPeerCertificate().serialNumber ?? '',
    })
  })
  socket.on('error', (error: NodeJS.ErrnoException) => {
    report({ authorized: false, code: error.code ?? 'UNKNOWN', message: error.message })
  })
}

if (process.argv[1] === SELF) {
  const role = process.argv[2]
  const input = JSON.parse(await readStdin()) as unknown
  if (role === 'server') runServer(input as TlsServerMaterial)
  else if (role === 'client') runClient(input as TlsClientOptions)
  else throw new Error(`tls-peer: unknown role ${role}`)
}

// ---- the test's side ----------------------------------------------------------------------

/** Spawns this file as `role` with `input` on stdin and resolves with the first line it prints. */
async function spawnPeer<T>(
  role: 'server' | 'client',
  input: unknown,
  children: Set<ChildProcess>,
): Promise<{ child: ChildProcess; answer: T }> {
  const child = spawn(process.execPath, [SELF, role], { stdio: ['pipe', 'pipe', 'pipe'] })
  children.add(child)
  child.once('exit', () => children.delete(child))
  let stderr = ''
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk
  })
  child.stdin!.end(JSON.stringify(input))
  const line = new Promise<string>((resolve, reject) => {
    let stdout = ''
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk
      const end = stdout.indexOf('\n')
      if (end >= 0) resolve(stdout.slice(0, end))
    })
    child.once('exit', (code) => reject(new Error(`tls-peer ${role} exited with ${code}: ${stderr}`)))
  })
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`tls-peer ${role} said nothing in ${PEER_TIMEOUT_MS} ms: ${stderr}`)),
      PEER_TIMEOUT_MS,
    )
  })
  try {
    return { child, answer: JSON.parse(await Promise.race([line, timeout])) as T }
  } catch (error) {
    child.kill('SIGKILL')
    throw error
  } finally {
    clearTimeout(timer)
  }
}

/**
 * The peers a test started; `stop()` kills those still running (call it in `after`, so that a
 * failed assertion leaves no process behind).
 */
export function tlsPeers() {
  const children = new Set<ChildProcess>()
  return {
    /** A TLS server process on 127.0.0.1; resolves with its port once it listens. */
    async server(material: TlsServerMaterial): Promise<{ port: number; child: ChildProcess }> {
      const { child, answer } = await spawnPeer<{ port: number }>('server', material, children)
      return { port: answer.port, child }
    },
    /** One client process: connects, reports OpenSSL's verdict (and the server's greeting), exits. */
    async client(options: TlsClientOptions): Promise<TlsClientOutcome> {
      return (await spawnPeer<TlsClientOutcome>('client', options, children)).answer
    },
    async stop(): Promise<void> {
      await Promise.all(
        [...children].map(async (child) => {
          if (child.exitCode !== null || child.signalCode !== null) return
          const exited = once(child, 'exit')
          child.kill('SIGKILL')
          await exited
        }),
      )
    },
  }
}

export const TLS_GREETING = GREETING
