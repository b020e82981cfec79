#!/usr/bin/env -S node --max-semi-space-size=1
// The V8 flag keeps the young generation small: streaming a file makes garbage (a few buffers and
// promises per 4 KB frame) that a default-sized young generation lets pile up to ~150 MB before
// collecting it; at 1 MB the peak of a 1 GB encrypt-file stays under 100 MB (docs/cli.md).
import { lstatSync, mkdirSync } from 'node:fs'
import { enableCompileCache } from 'node:module'
import { homedir } from 'node:os'
import { isAbsolute, join } from 'node:path'

// Node strips the TypeScript of every module at each start unless the result is cached: the cache
// makes a start about three times faster and 40 MB smaller. This file is JavaScript so that a start
// from the cache never loads the TypeScript stripper at all. The cache is code Node runs, so it is
// kept in the user's own cache directory (0700), never the shared /tmp/node-compile-cache another
// user could fill first; a directory others can write to is not used (the start is slower, no more).
// NODE_COMPILE_CACHE, when set, is Node's own choice and wins.
function privateCacheDir() {
  const xdg = process.env.XDG_CACHE_HOME
  const dir = join(xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.cache'), 'kms', 'node-compile-cache')
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const stats = lstatSync(dir)
    const uid = process.getuid?.()
    const ownedAlone = uid === undefined || (stats.uid === uid && (stats.mode & 0o022) === 0)
    return stats.isDirectory() && ownedAlone ? dir : undefined
  } catch {
    return undefined
  }
}

const cacheDir = process.env.NODE_COMPILE_CACHE ? undefined : privateCacheDir()
if (cacheDir) enableCompileCache(cacheDir)
const { main } = await import('../src/main.ts')
process.exitCode = await main(process.argv.slice(2))
