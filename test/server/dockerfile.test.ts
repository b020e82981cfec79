import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join, posix, relative } from 'node:path'
import { describe, test } from 'node:test'
import { dockerignore, parseDockerfile } from '../helpers/dockerfile.ts'
import { PROJECT_ROOT } from '../helpers/service.ts'

/**
 * Docker is not available where the tests run, so the Dockerfile is checked by reading it: every
 * COPY/ADD source exists in the build context (after .dockerignore), the CMD's entry file is in
 * the image, and so is every file the running service reads from disk.
 */

/** Every file below `dir` (relative to the context, POSIX separators). */
function filesUnder(dir: string): string[] {
  const abs = join(PROJECT_ROOT, dir)
  if (statSync(abs).isFile()) return [dir]
  return readdirSync(abs, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(PROJECT_ROOT, join(e.parentPath, e.name)).split('\\').join('/'))
}

const dockerfile = parseDockerfile(readFileSync(join(PROJECT_ROOT, 'Dockerfile'), 'utf8'))
const ignoreFile = join(PROJECT_ROOT, '.dockerignore')
const ignored = existsSync(ignoreFile) ? dockerignore(readFileSync(ignoreFile, 'utf8')) : () => false

/** The files of the final image that come from the build context, by absolute path in the image. */
function imageFiles(): Map<string, string> {
  const stage = dockerfile.at(-1)!
  const files = new Map<string, string>()
  let workdir = '/'
  for (const ins of stage) {
    if (ins.keyword === 'WORKDIR') workdir = posix.resolve(workdir, ins.args[0]!)
    if ((ins.keyword !== 'COPY' && ins.keyword !== 'ADD') || ins.flags['from'] !== undefined) continue
    const dest = posix.resolve(workdir, ins.args.at(-1)!)
    for (const source of ins.args.slice(0, -1)) {
      const src = posix.normalize(source).replace(/^\.\/?|\/$/g, '')
      for (const file of filesUnder(src === '' ? '.' : src).filter((f) => !ignored(f))) {
        // A folder's contents land in the destination; a single file keeps its name in a folder destination.
        const inside = src === '' || src === '.' ? file : posix.relative(src, file)
        const target = inside === '' ? posix.join(dest, posix.basename(file)) : posix.join(dest, inside)
        files.set(target, file)
      }
    }
  }
  return files
}

function workdirOfFinalStage(): string {
  let workdir = '/'
  for (const ins of dockerfile.at(-1)!)
    if (ins.keyword === 'WORKDIR') workdir = posix.resolve(workdir, ins.args[0]!)
  return workdir
}

describe('Dockerfile', () => {
  test('the .dockerignore matcher follows Docker rules (a check on the checker)', () => {
    const match = dockerignore('node_modules\n*.log\ndocs/**\n!docs/keep.md\n')
    assert.equal(match('node_modules/x/index.js'), true)
    assert.equal(match('server.log'), true)
    assert.equal(match('src/server.log'), false, '*.log matches at the root only')
    assert.equal(match('docs/a/b.md'), true)
    assert.equal(match('docs/keep.md'), false)
    assert.equal(match('src/main.ts'), false)
  })

  test('every COPY/ADD source from the build context exists and is not excluded by .dockerignore', () => {
    const sources = dockerfile
      .flat()
      .filter((i) => (i.keyword === 'COPY' || i.keyword === 'ADD') && i.flags['from'] === undefined)
      .flatMap((i) => i.args.slice(0, -1))
    assert.ok(sources.length > 0, 'the Dockerfile copies something')
    const missing = sources.filter((s) => !existsSync(join(PROJECT_ROOT, s)))
    assert.deepEqual(missing, [], 'COPY sources that do not exist')
    const empty = sources.filter((s) => filesUnder(posix.normalize(s)).every((f) => ignored(f)))
    assert.deepEqual(empty, [], 'COPY sources that .dockerignore removes entirely')
  })

  test("the CMD's entry file is in the image", () => {
    const cmd = dockerfile.at(-1)!.findLast((i) => i.keyword === 'CMD')
    assert.ok(cmd, 'the final stage has a CMD')
    assert.equal(cmd.args[0], 'node')
    const entry = posix.resolve(workdirOfFinalStage(), cmd.args[1]!)
    assert.ok(imageFiles().has(entry), `${entry} is copied into the image`)
  })

  test('the files the service reads from disk at run time are in the image', () => {
    const image = imageFiles()
    const app = workdirOfFinalStage()
    const inImage = (file: string) => image.has(posix.join(app, file))
    // Migrations (src/data/migrations.ts reads the folder beside it).
    const migrations = readdirSync(join(PROJECT_ROOT, 'src/data/migrations')).filter((f) =>
      f.endsWith('.sql'),
    )
    assert.ok(migrations.length > 0)
    for (const m of migrations) assert.ok(inImage(`src/data/migrations/${m}`), `migration ${m}`)
    assert.ok(inImage('src/crypto-pool/worker.ts'), 'the crypto pool worker file')
    assert.ok(inImage('package.json'), 'package.json (src/version.ts reads the version)')
    // Every module of src is there (the entry imports them at run time).
    const missing = filesUnder('src').filter((f) => f.endsWith('.ts') && !inImage(f))
    assert.deepEqual(missing, [])
  })

  test('the data directory (KMS_DATA_DIR) is a declared volume, prepared before the declaration', () => {
    const stage = dockerfile.at(-1)!
    const env = new Map(
      stage
        .filter((i) => i.keyword === 'ENV')
        .flatMap((i) => i.args)
        .map((pair) => pair.split('=') as [string, string]),
    )
    const dataDir = env.get('KMS_DATA_DIR')
    assert.ok(dataDir, 'the final stage sets KMS_DATA_DIR')
    const volume = stage.findIndex((i) => i.keyword === 'VOLUME' && i.args.includes(dataDir))
    assert.notEqual(volume, -1, `VOLUME declares ${dataDir}`)
    // Docker discards what a build step changes in a declared volume: the chown must come first.
    const prepared = stage.findLastIndex((i) => i.keyword === 'RUN' && i.args.includes(dataDir))
    assert.ok(prepared !== -1 && prepared < volume, `${dataDir} is created and owned before VOLUME`)
  })

  test('no source file reads a path from disk that this test does not know about', () => {
    // A new `import.meta.dirname`/`import.meta.url` use means a new file read at run time: add it above.
    const known = new Set([
      'src/crypto-pool/crypto-pool.ts',
      'src/data/migrations.ts',
      'src/version.ts',
      // console/dist, beside src: the next test.
      'src/console/console-files.ts',
    ])
    const readers = filesUnder('src').filter(
      (f) =>
        f.endsWith('.ts') &&
        /import\.meta\.(dirname|url|filename)/.test(readFileSync(join(PROJECT_ROOT, f), 'utf8')),
    )
    assert.deepEqual(
      readers.filter((f) => !known.has(f)),
      [],
    )
  })

  test("the console's built files (console/dist) come from a stage that builds them", () => {
    const stages = dockerfile
    const final = stages.at(-1)!
    const copy = final.find(
      (i) => i.keyword === 'COPY' && i.flags['from'] !== undefined && i.args.at(-1) === './console/dist',
    )
    assert.ok(copy, 'the final stage copies console/dist from a build stage')
    const app = workdirOfFinalStage()
    assert.equal(
      posix.resolve(app, './console/dist'),
      '/app/console/dist',
      'beside /app/src, as CONSOLE_DIST says',
    )
    const builder = stages.find((stage) =>
      stage.some((i) => i.keyword === 'FROM' && i.args.at(-1) === copy.flags['from']),
    )
    assert.ok(builder, `the stage ${copy.flags['from']} exists`)
    const runs = builder.filter((i) => i.keyword === 'RUN').map((i) => i.args.join(' '))
    assert.ok(
      runs.some((line) => line.includes('npm ci') && line.includes('node scripts/console-build.ts')),
      runs.join('\n'),
    )
    assert.equal(copy.args[0], '/app/console/dist', 'the folder the build writes')
  })
})
