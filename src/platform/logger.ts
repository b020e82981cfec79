import { type Logger, pino } from 'pino'

/**
 * Paths that could carry a credential or key material, wherever they appear in a log object.
 * Handlers never log bodies, but a mistake must still not leak.
 */
export const REDACTED_PATHS = [
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  '*.apiKey',
  '*.key',
  '*.secret',
  '*.password',
  '*.plaintext',
  '*.token',
  '*.masterKey',
  'headers["x-api-key"]',
  'headers.authorization',
]

/** `destination` 2 sends the log to stderr (command-line tools keep stdout for results). */
export function createLogger(level: string, name: string, destination: 1 | 2 = 1): Logger {
  return pino(
    {
      name,
      level,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination({ fd: destination, sync: destination === 2 }),
  )
}
