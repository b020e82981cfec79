/**
 * A deterministic pseudo-random generator (mulberry32) for the fuzz suites: a seed reproduces a
 * run exactly. Not for anything secret.
 */
export class Rng {
  private state: number
  constructor(seed: number) {
    this.state = seed >>> 0
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  int(n: number): number {
    return Math.floor(this.next() * n)
  }
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1)
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list')
    return items[this.int(items.length)]!
  }
  fromAlphabet(length: number, alphabet: string): string {
    let out = ''
    for (let i = 0; i < length; i++) out += alphabet[this.int(alphabet.length)]
    return out
  }
  bytes(n: number): Buffer {
    const out = Buffer.alloc(n)
    for (let i = 0; i < n; i++) out[i] = this.int(256)
    return out
  }
  /** Characters fetch can put in a header value: tab, printable ASCII, and 0x80-0xFF (sent as bytes). */
  headerGarbage(length: number): string {
    let out = ''
    for (let i = 0; i < length; i++) {
      const r = this.int(100)
      const code = r < 3 ? 0x09 : r < 60 ? this.range(0x20, 0x7e) : this.range(0x80, 0xff)
      out += String.fromCharCode(code)
    }
    return out
  }
  /** Characters that trip JSON and text handling: NUL, lone surrogates, bidi overrides, quotes. */
  unicode(n: number): string {
    const pool = ['a', 'é', '€', '😀', '\u0000', '\ud800', '\udfff', '\u202e', '"', '\\', '\n', '\uffff', ' ']
    let out = ''
    for (let i = 0; i < n; i++) out += this.pick(pool)
    return out
  }
  uuid(): string {
    const hex = this.fromAlphabet(32, '0123456789abcdef')
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20)}`
  }
}
