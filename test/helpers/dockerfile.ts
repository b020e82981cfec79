import { posix } from 'node:path'

/**
 * Reading the Dockerfile and .dockerignore as Docker does (Docker is not available where the tests
 * run): test/server/dockerfile.test.ts checks what the image holds, test/server/production-install.test.ts
 * installs and starts the service as the image's build does.
 */

export interface Instruction {
  keyword: string
  args: string[]
  flags: Record<string, string>
}

/** Instructions of the Dockerfile, continuation lines joined, comments dropped, per build stage. */
export function parseDockerfile(text: string): Instruction[][] {
  const logical: string[] = []
  let pending = ''
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (pending === '' && (line === '' || line.startsWith('#'))) continue
    if (line.startsWith('#')) continue
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `
      continue
    }
    logical.push(pending + line)
    pending = ''
  }
  const stages: Instruction[][] = []
  for (const line of logical) {
    const [keyword = '', ...rest] = line.split(/\s+/)
    const upper = keyword.toUpperCase()
    const body = line.slice(keyword.length).trim()
    let args: string[]
    if (body.startsWith('[')) args = JSON.parse(body) as string[]
    else args = rest
    const flags: Record<string, string> = {}
    while (args[0]?.startsWith('--')) {
      const [name, value = ''] = args[0].slice(2).split('=')
      flags[name!] = value
      args = args.slice(1)
    }
    if (upper === 'FROM') stages.push([])
    stages.at(-1)?.push({ keyword: upper, args, flags })
  }
  return stages
}

/** .dockerignore semantics: patterns match from the context root, `**` any depth, `!` re-includes, last match wins. */
export function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!')
      const pattern = posix.normalize((negate ? l.slice(1) : l).replace(/^\/+/, ''))
      const source = pattern
        .split('/')
        .map((part) =>
          part === '**'
            ? '.*'
            : part
                .replace(/[.+^${}()|\\]/g, '\\$&')
                .replace(/\*/g, '[^/]*')
                .replace(/\?/g, '[^/]'),
        )
        .join('/')
      return { negate, regex: new RegExp(`^${source}$`) }
    })
  return (path) => {
    // A path is excluded when it or one of its parent folders is.
    const parts = path.split('/')
    let excluded = false
    for (let i = 1; i <= parts.length; i++) {
      const prefix = parts.slice(0, i).join('/')
      for (const rule of rules) if (rule.regex.test(prefix)) excluded = !rule.negate
    }
    return excluded
  }
}
