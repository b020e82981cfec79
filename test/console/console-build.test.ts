import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { buildConsole } from '../../scripts/console-build.ts'
import { CONSOLE_SCREENSHOTS } from '../helpers/console.ts'
import { PROJECT_ROOT } from '../helpers/service.ts'

/**
 * The console's production build (issue 34): it builds, its first load stays within the budget
 * of 250 KB of gzipped JavaScript, each area's pages load later (their own chunks), and the page
 * has no inline script or style for the CSP to refuse. The figure is printed and written to
 * test-results/console/bundle-size.json.
 */

const DIST = join(PROJECT_ROOT, 'console', 'dist')
const BUDGET_BYTES = 250 * 1024

interface ManifestChunk {
  file: string
  isEntry?: boolean
  imports?: string[]
  dynamicImports?: string[]
  css?: string[]
}

test('the production build loads at most 250 KB of gzipped JavaScript first, and every area later', async (t) => {
  await buildConsole()
  const manifest = JSON.parse(readFileSync(join(DIST, '.vite', 'manifest.json'), 'utf8')) as Record<
    string,
    ManifestChunk
  >
  const entries = Object.entries(manifest).filter(([, chunk]) => chunk.isEntry)
  assert.equal(entries.length, 1, 'one entry: index.html')
  // The first load: the entry and every chunk it imports statically, transitively.
  const initial = new Set<string>()
  const visit = (key: string) => {
    if (initial.has(key)) return
    initial.add(key)
    for (const imported of manifest[key]?.imports ?? []) visit(imported)
  }
  visit(entries[0]![0])
  const gzipped = (file: string) => gzipSync(readFileSync(join(DIST, file))).length
  const initialJs = [...initial].map((key) => manifest[key]!.file)
  const initialBytes = initialJs.reduce((sum, file) => sum + gzipped(file), 0)
  const css = [...initial].flatMap((key) => manifest[key]!.css ?? [])
  const cssBytes = css.reduce((sum, file) => sum + gzipped(file), 0)
  const lazy = Object.entries(manifest).filter(
    ([key, chunk]) => !initial.has(key) && chunk.file.endsWith('.js'),
  )
  const lazyBytes = lazy.reduce((sum, [, chunk]) => sum + gzipped(chunk.file), 0)
  const figures = {
    initialJsGzipBytes: initialBytes,
    initialJsFiles: initialJs,
    budgetBytes: BUDGET_BYTES,
    initialCssGzipBytes: cssBytes,
    lazyChunks: lazy.length,
    lazyJsGzipBytes: lazyBytes,
  }
  mkdirSync(CONSOLE_SCREENSHOTS, { recursive: true })
  writeFileSync(join(CONSOLE_SCREENSHOTS, 'bundle-size.json'), `${JSON.stringify(figures, null, 2)}\n`)
  t.diagnostic(
    `initial JavaScript ${(initialBytes / 1024).toFixed(1)} KB gzipped of ${BUDGET_BYTES / 1024} KB; ` +
      `CSS ${(cssBytes / 1024).toFixed(1)} KB; ${lazy.length} lazy chunks, ${(lazyBytes / 1024).toFixed(1)} KB`,
  )
  assert.ok(initialBytes <= BUDGET_BYTES, `${initialBytes} bytes of gzipped JavaScript on the first load`)

  // Each area is its own chunk, loaded on first visit: none of the pages is in the first load.
  const pages = Object.keys(manifest).filter((key) => key.startsWith('src/pages/'))
  for (const area of ['keys', 'try', 'secrets', 'api-keys', 'team', 'settings', 'audit'])
    assert.ok(
      pages.some((key) => key.startsWith(`src/pages/${area}/`)),
      `the ${area} pages are a chunk of their own`,
    )
  for (const key of pages) assert.ok(!initial.has(key), `${key} is loaded later`)

  // The page the service serves: its own files only, no inline script or style, every one present.
  const html = readFileSync(join(DIST, 'index.html'), 'utf8')
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/i, 'no inline script')
  assert.doesNotMatch(html, /<style|\sstyle=/i, 'no inline style')
  for (const [, path] of html.matchAll(/(?:src|href)="([^"]+)"/g)) {
    assert.ok(path!.startsWith('/console/'), `${path} is the console's own`)
    assert.ok(existsSync(join(DIST, path!.slice('/console/'.length))), `${path} is in the build`)
  }
})
