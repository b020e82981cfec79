#!/usr/bin/env -S node --max-semi-space-size=1
// The V8 flag keeps the young generation small: streaming a file makes garbage (a few buffers and
// promises per 4 KB frame) that a default-sized young generation lets pile up to ~150 MB before
// collecting it; at 1 MB the peak of a 1 GB encrypt-file stays under 100 MB (docs/cli.md).
import { enableCompileCache } from 'node:module'

// Node strips the TypeScript of every module at each start unless the result is cached: the cache
// (in the OS's temporary directory) makes a start about three times faster and 40 MB smaller. This
// file is JavaScript so that a start from the cache never loads the TypeScript stripper at all.
enableCompileCache()
const { main } = await import('../src/main.ts')
process.exitCode = await main(process.argv.slice(2))
