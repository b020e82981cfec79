import { inspect } from 'node:util'

const REDACTED = '[redacted]'

/**
 * A QRNG API key or bearer token. The config object is passed around and could end up in a
 * log line or an error dump; the logger's redaction paths do not know this field, so the value
 * hides itself from JSON, string conversion and util.inspect, and only `reveal()` gives it out.
 */
export class Credential {
  readonly #value: string

  constructor(value: string) {
    this.#value = value
  }

  /** The secret itself: only for the one request header that carries it. */
  reveal(): string {
    return this.#value
  }

  toJSON(): string {
    return REDACTED
  }

  toString(): string {
    return REDACTED
  }

  [inspect.custom](): string {
    return `Credential(${REDACTED})`
  }
}
