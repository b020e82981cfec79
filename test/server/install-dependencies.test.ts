import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { isBuiltin, stripTypeScriptTypes } from 'node:module'
import { join } from 'node:path'
import { describe, test } from 'node:test'

/**
 * The production install (`npm ci --omit=dev`, the Dockerfile's) has only `dependencies`: a package
 * that src/ imports but package.json lists as a devDependency is there for every other test and
 * missing in the image, where the start stops with ERR_MODULE_NOT_FOUND. This reads every import
 * of src/ and checks each package is a dependency (test/server/production-install.test.ts starts the
 * real production install; this check is the quick one that names the package).
 *
 * Only what runs counts: the imports are read from what Node executes, the source with its types
 * stripped by Node's own stripper (`import type` goes; `import { type X } from 'p'` stays, as an
 * import of p). This file does not load src/, so a broken module elsewhere does not hide the check.
 */

const ROOT = join(import.meta.dirname, '..', '..')

/** Module specifiers of a module's JavaScript: static imports and re-exports, side-effect and dynamic imports. */
function importedSpecifiers(javascript: string): string[] {
  const patterns = [
    // `import x from 'p'`, `import { a,\n b } from 'p'`, `export * from 'p'`; the statement may span
    // lines, but not a parenthesis or a string, so it cannot run on into a function body.
    /^[ \t]*(?:import|export)\b[^;'"()]*?\bfrom\s*(['"])(.+?)\1/gm,
    /^[ \t]*import\s*(['"])(.+?)\1/gm,
    /\bimport\s*\(\s*(['"])(.+?)\1\s*\)/g,
  ]
  return patterns.flatMap((p) => [...javascript.matchAll(p)].map((m) => m[2]!))
}

/** The package a bare specifier names: `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name))
}

/** Every package src/ imports at run time, with the files importing it. */
function runtimePackages(): Map<string, string[]> {
  const packages = new Map<string, string[]>()
  for (const file of sourceFiles('src')) {
    let javascript: string
    try {
      javascript = stripTypeScriptTypes(readFileSync(file, 'utf8'))
    } catch (err) {
      // Node cannot run this file either (a parameter property, an enum): say which one.
      throw new Error(`${file.slice(ROOT.length + 1)}: ${(err as Error).message}`)
    }
    for (const specifier of importedSpecifiers(javascript)) {
      if (specifier.startsWith('.') || specifier.startsWith('/') || isBuiltin(specifier)) continue
      const name = packageOf(specifier)
      packages.set(name, [...(packages.get(name) ?? []), file.slice(ROOT.length + 1)])
    }
  }
  return packages
}

describe('install dependencies', () => {
  test('the import reader finds what runs and skips what does not (a check on the checker)', () => {
    const source = [
      "import type { A } from 'type-only'",
      "import { type B } from 'kept-as-import'",
      "import {\n  c,\n  type D,\n} from '@scope/multi-line/sub/path'",
      "export { e } from 're-export'",
      "export * from 'star'",
      "import 'side-effect'",
      "const f = await import('dynamic')",
      "// import g from 'commented'",
      "export function h() {\n  return Buffer.from('not-an-import')\n}",
      "import i from 'node:fs'",
    ].join('\n')
    assert.deepEqual(importedSpecifiers(stripTypeScriptTypes(source)).sort(), [
      '@scope/multi-line/sub/path',
      'dynamic',
      'kept-as-import',
      'node:fs',
      're-export',
      'side-effect',
      'star',
    ])
    assert.equal(packageOf('@scope/multi-line/sub/path'), '@scope/multi-line')
    assert.equal(packageOf('typebox/value'), 'typebox')
    // The real sources: a known import of each kind is found.
    const found = runtimePackages()
    assert.ok(found.get('fastify')?.includes('src/server/http.ts'))
    assert.ok(found.get('@xmldom/xmldom')?.includes('src/federation/saml-service.ts'))
  })

  test('every package src/ imports is a dependency (not a devDependency): the production install has it', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>
      devDependencies?: Record<string, string>
    }
    const dependencies = new Set(Object.keys(manifest.dependencies ?? {}))
    const misplaced = [...runtimePackages()]
      .filter(([name]) => !dependencies.has(name))
      .map(
        ([name, files]) =>
          `${name} (imported by ${[...new Set(files)].join(', ')}; ${
            manifest.devDependencies?.[name] ? 'a devDependency' : 'not in package.json'
          })`,
      )
    assert.deepEqual(misplaced, [], 'move these to "dependencies" (npm install --save-prod <name>@<version>)')
  })
})
