import { createHash } from 'node:crypto'
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import { CONSOLE_DIST } from '../src/console/console-files.ts'

/**
 * npm run console:build (and npm start, before the service): builds the web console (console/)
 * unless console/dist is current. The tests build it with `buildConsole()`. A build tool, not part of the service: the service only reads the
 * built files (src/console/console-files.ts).
 */
const CONSOLE_ROOT = dirname(CONSOLE_DIST)
/** The hash of the sources a build was made from, kept beside it. */
const STAMP = '.source-hash'
const LOCK = join(CONSOLE_ROOT, '.build-lock')
/** A lock older than this was left by a build that died. */
const STALE_LOCK_MS = 10 * 60_000

/** Everything a build depends on: its sources, page, configuration and dependencies' versions. */
function sourceHash(): string {
  const hash = createHash('sha256')
  const add = (path: string) => {
    const stat = statSync(path)
    if (stat.isDirectory()) {
      for (const name of readdirSync(path).sort()) add(join(path, name))
    } else {
      hash.update(path.slice(CONSOLE_ROOT.length)).update('\0').update(readFileSync(path)).update('\0')
    }
  }
  for (const name of ['src', 'public', 'index.html', 'vite.config.ts', 'package.json', 'tsconfig.json'])
    if (existsSync(join(CONSOLE_ROOT, name))) add(join(CONSOLE_ROOT, name))
  const lock = join(CONSOLE_ROOT, '..', 'package-lock.json')
  if (existsSync(lock)) hash.update(readFileSync(lock))
  return hash.digest('hex')
}

const isCurrent = (hash: string) => {
  try {
    return readFileSync(join(CONSOLE_DIST, STAMP), 'utf8') === hash
  } catch {
    return false
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Builds the console (Vite, production) unless console/dist was built from the same sources.
 * Several processes may ask at once (test files running side by side): one builds under a lock
 * folder, into a folder of its own that replaces dist whole; the others wait and then find it
 * current. Answers whether this call built.
 */
export async function buildConsole(options: { log?: (line: string) => void } = {}) {
  const log = options.log ?? (() => {})
  for (;;) {
    const hash = sourceHash()
    if (isCurrent(hash)) return { built: false }
    try {
      mkdirSync(LOCK)
    } catch {
      const age = Date.now() - (statSync(LOCK, { throwIfNoEntry: false })?.mtimeMs ?? Date.now())
      if (age > STALE_LOCK_MS) rmSync(LOCK, { recursive: true, force: true })
      await sleep(250)
      continue
    }
    try {
      if (isCurrent(hash)) return { built: false }
      log('building the console (console/, vite build)')
      const out = join(CONSOLE_ROOT, `dist.building-${process.pid}`)
      rmSync(out, { recursive: true, force: true })
      const vite = await import('vite')
      await vite.build({
        root: CONSOLE_ROOT,
        configFile: join(CONSOLE_ROOT, 'vite.config.ts'),
        logLevel: 'warn',
        build: { outDir: out, emptyOutDir: true },
      })
      writeFileSync(join(out, STAMP), hash)
      const old = join(CONSOLE_ROOT, `dist.old-${process.pid}`)
      if (existsSync(CONSOLE_DIST)) renameSync(CONSOLE_DIST, old)
      renameSync(out, CONSOLE_DIST)
      rmSync(old, { recursive: true, force: true })
      return { built: true }
    } finally {
      rmSync(LOCK, { recursive: true, force: true })
    }
  }
}

if (import.meta.main) {
  const { built } = await buildConsole({ log: (line) => process.stderr.write(`${line}\n`) })
  process.stderr.write(built ? 'console built: console/dist\n' : 'console is current: console/dist\n')
}
