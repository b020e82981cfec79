import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { extname, join, relative, sep } from 'node:path'

/** Where `npm run console:build` (scripts/console-build.ts) writes the console's production build. */
export const CONSOLE_DIST = join(import.meta.dirname, '..', '..', 'console', 'dist')

/**
 * The console's built files (console/dist, made by `npm run console:build`), read once at start:
 * a few hundred kilobytes, served from memory. Paths are the files' own, relative to the folder,
 * with forward slashes; nothing outside the folder is ever read for a request.
 */
interface ConsoleFile {
  body: Buffer
  contentType: string
  /** A strong validator: the content's hash. */
  etag: string
}

export interface ConsoleFiles {
  /** index.html, or undefined when the console has not been built. */
  index: ConsoleFile | undefined
  /** A file by its path under the folder ("assets/index-3f2a1c.js"). */
  file(path: string): ConsoleFile | undefined
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
}

/** Files larger than this are not served (the console has none; a stray build artefact might). */
const MAX_FILE_BYTES = 8 * 1024 * 1024

export function loadConsoleFiles(folder: string): ConsoleFiles {
  const files = new Map<string, ConsoleFile>()
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.isFile() && statSync(path).size <= MAX_FILE_BYTES) {
        const contentType = TYPES[extname(entry.name).toLowerCase()]
        if (!contentType) continue
        const body = readFileSync(path)
        const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`
        files.set(relative(folder, path).split(sep).join('/'), { body, contentType, etag })
      }
    }
  }
  if (existsSync(folder)) walk(folder)
  return { index: files.get('index.html'), file: (path) => files.get(path) }
}
