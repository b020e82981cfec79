import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { loadConfig } from '../../src/config.ts'
import { PROJECT_ROOT } from '../helpers/service.ts'

/** Keeps README's configuration table and docs/operations.md true to the code. */

const read = (file: string) => readFileSync(join(PROJECT_ROOT, file), 'utf8')

/**
 * The variables src/config.ts reads: every name loadConfig asks its environment for (an empty
 * environment takes every default branch), plus every `env['NAME']` written in the file, for
 * reads that only happen under some condition.
 */
function configVariables(): Set<string> {
  const seen = new Set<string>()
  const env = new Proxy({} as NodeJS.ProcessEnv, {
    get(_target, name) {
      if (typeof name === 'string') seen.add(name)
      return undefined
    },
  })
  loadConfig(env)
  for (const m of read('src/config.ts').matchAll(/env\[['"]([A-Z][A-Z0-9_]*)['"]\]/g)) seen.add(m[1]!)
  return seen
}

/** Names in backticks in the first column of README's Configuration table. */
function readmeVariables(): Set<string> {
  const section = read('README.md').split('## Configuration')[1]?.split('\n## ')[0] ?? ''
  const names = new Set<string>()
  for (const line of section.split('\n')) {
    if (!line.startsWith('| `')) continue
    const firstColumn = line.split('|')[1] ?? ''
    for (const m of firstColumn.matchAll(/`([A-Z][A-Z0-9_]*)`/g)) names.add(m[1]!)
  }
  return names
}

/** Environment-variable-looking names anywhere in docs/operations.md. */
function operationsVariables(): Set<string> {
  const names = new Set<string>()
  for (const m of read('docs/operations.md').matchAll(
    /\b((?:KMS|DATABASE|REDIS|NODE|LOG)_[A-Z0-9_]*[A-Z0-9]|HOST|PORT)\b/g,
  ))
    names.add(m[1]!)
  return names
}

const difference = (a: Set<string>, b: Set<string>) => [...a].filter((x) => !b.has(x)).sort()

describe('documentation matches the code', () => {
  test("README's configuration table lists exactly the variables src/config.ts reads", () => {
    const config = configVariables()
    const readme = readmeVariables()
    assert.ok(config.has('KMS_MASTER_KEY') && config.has('PORT'), 'the config scan finds variables')
    assert.deepEqual(difference(config, readme), [], 'read by src/config.ts but missing from README')
    assert.deepEqual(difference(readme, config), [], 'in README but not read by src/config.ts')
  })

  test('every variable docs/operations.md names is one src/config.ts reads', () => {
    const named = operationsVariables()
    assert.ok(named.size > 5)
    assert.deepEqual(difference(named, configVariables()), [])
  })

  test('every command, npm script and repository path docs/operations.md names exists', () => {
    const text = read('docs/operations.md')
    const scripts = JSON.parse(read('package.json')).scripts as Record<string, string>
    const cli = read('src/cli/main.ts')
    for (const m of text.matchAll(/npm run ([a-z:-]+)(?: -- ([a-z-]+))?/g)) {
      assert.ok(scripts[m[1]!], `npm script ${m[1]}`)
      if (m[1] === 'kms' && m[2]) assert.ok(cli.includes(`case '${m[2]}'`), `CLI command ${m[2]}`)
    }
    for (const m of text.matchAll(/`((?:docs|src|test)\/[\w./-]+)`/g)) {
      assert.ok(existsSync(join(PROJECT_ROOT, m[1]!)), `path ${m[1]}`)
    }
    assert.ok(existsSync(join(PROJECT_ROOT, 'Dockerfile')), 'the Docker section has a Dockerfile to build')
  })
})
