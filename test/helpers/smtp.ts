import type { AddressInfo } from 'node:net'
import { SMTPServer } from 'smtp-server'

export interface CapturedMail {
  from: string
  to: string[]
  raw: string
}

export type SmtpMode = 'accept' | 'refuse' | 'hang'

/**
 * A local SMTP server (smtp-server) the service sends to in tests. `accept` stores every message;
 * `refuse` answers every recipient with 550; `hang` accepts the connection and never says a word
 * (the client's greeting timeout must end the attempt). `connections` counts what reached it.
 */
export interface TestSmtp {
  url: string
  mode: SmtpMode
  messages: CapturedMail[]
  connections: number
  /** Ends the hanging connections (the test's own clean-up). */
  stop(): Promise<void>
}

export async function startSmtp(mode: SmtpMode = 'accept'): Promise<TestSmtp> {
  const hanging = new Set<import('node:net').Socket>()
  const state: TestSmtp = { url: '', mode, messages: [], connections: 0, stop: async () => {} }
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onConnect(_session, callback) {
      state.connections++
      callback()
    },
    onRcptTo(_address, _session, callback) {
      if (state.mode === 'refuse') {
        const err = Object.assign(new Error('Mailbox unavailable'), { responseCode: 550 })
        return callback(err)
      }
      callback()
    },
    onData(stream, session, callback) {
      let raw = ''
      stream.on('data', (chunk: Buffer) => {
        raw += chunk.toString('utf8')
      })
      stream.on('end', () => {
        state.messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
        })
        callback()
      })
    },
  })
  // `hang`: a plain TCP listener in front that accepts and stays silent.
  const net = await import('node:net')
  const silent = net.createServer((socket) => {
    state.connections++
    hanging.add(socket)
    socket.on('close', () => hanging.delete(socket))
    socket.on('error', () => {})
  })
  if (mode === 'hang') await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()))
  else await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = (mode === 'hang' ? silent : server.server).address() as AddressInfo
  state.url = `smtp://127.0.0.1:${port}`
  state.stop = async () => {
    for (const socket of hanging) socket.destroy()
    await new Promise<void>((resolve) =>
      mode === 'hang' ? silent.close(() => resolve()) : server.close(() => resolve()),
    )
  }
  return state
}

/** The text part of a captured message, quoted-printable soft breaks undone. */
export function textOf(mail: CapturedMail): string {
  return mail.raw.replace(/=\r?\n/g, '').replace(/=3D/g, '=')
}
