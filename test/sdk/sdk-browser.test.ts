import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import type { Browser } from 'playwright-core'
import { build } from 'vite'
import { VECTORS_FILE } from '../../scripts/make-sdk-vectors.ts'
import { launchChromium } from '../helpers/browser.ts'
import { PROJECT_ROOT } from '../helpers/service.ts'
import { independentDecrypt } from './independent-decryptor.ts'

/**
 * The SDK in a browser, as a web application would ship it: packages/sdk bundled by Vite (the
 * console's bundler) into one ES module, loaded by a page in Chromium from a local origin (a
 * secure context, where WebCrypto is). There it decrypts every published vector (or fails with
 * the vector's error code) and encrypts a message that Node then opens with the independent
 * decryptor: the format is the same in both runtimes, and the SDK needs nothing of Node.
 */

interface Vector {
  name: string
  dataKeys: { providerId: string; providerInfo: string; encryptedDataKey: string; dataKey: string }[]
  expectedContext?: Record<string, string>
  message: string
  plaintext?: { hex: string } | { length: number; sha256: string }
  expectedError?: string
}

let dir: string
let server: Server
let origin: string
let browser: Browser

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kms-sdk-browser-'))
  await build({
    configFile: false,
    logLevel: 'silent',
    root: dir,
    build: {
      outDir: join(dir, 'dist'),
      minify: false,
      lib: {
        entry: join(PROJECT_ROOT, 'packages', 'sdk', 'src', 'index.ts'),
        formats: ['es'],
        fileName: () => 'sdk.js',
      },
    },
  })
  const bundle = await readFile(join(dir, 'dist', 'sdk.js'))
  server = createServer((req, res) => {
    if (req.url === '/sdk.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' })
      res.end(bundle)
    } else {
      res.writeHead(200, { 'content-type': 'text/html' })
      res.end('<!doctype html><title>SDK</title>')
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  browser = await launchChromium()
})

after(async () => {
  await browser?.close()
  await new Promise((resolve) => server?.close(resolve))
  if (dir) await rm(dir, { recursive: true, force: true })
})

test('bundled for the browser, the SDK decrypts every published vector and encrypts what Node decrypts', async () => {
  const manifest = JSON.parse(await readFile(VECTORS_FILE, 'utf8')) as { vectors: Vector[] }
  const page = await browser.newPage()
  await page.goto(origin)
  const plaintextHex = Buffer.from(Array.from({ length: 10_000 }, (_, i) => (i * 7) % 256)).toString('hex')
  const dataKeyHex = '11'.repeat(32)
  const results = await page.evaluate(
    async ({ vectors, plaintextHex, dataKeyHex }) => {
      const sdk = await import('/sdk.js' as string)
      const fromHex = (hex: string) =>
        new Uint8Array(hex.match(/../g)?.map((b) => Number.parseInt(b, 16)) ?? [])
      const toHex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')
      const fromBase64 = (text: string) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0))
      const outcomes: Record<string, { hex?: string; sha256?: string; length?: number; error?: string }> = {}
      for (const vector of vectors) {
        const keyring = sdk.createRawKeyring(
          vector.dataKeys.map((k) => ({
            edk: {
              providerId: k.providerId,
              providerInfo: k.providerInfo,
              encryptedDataKey: fromHex(k.encryptedDataKey),
            },
            dataKey: fromHex(k.dataKey),
          })),
        )
        try {
          const { plaintext } = await sdk.decrypt(keyring, fromBase64(vector.message), {
            ...(vector.expectedContext ? { expectedContext: vector.expectedContext } : {}),
          })
          const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', plaintext))
          outcomes[vector.name] = { hex: toHex(plaintext), sha256: toHex(digest), length: plaintext.length }
        } catch (error) {
          outcomes[vector.name] = { error: (error as { code?: string }).code ?? String(error) }
        }
      }
      const edk = {
        providerId: 'kms',
        providerInfo: '00000000-0000-4000-8000-000000000000',
        encryptedDataKey: new Uint8Array(8),
      }
      const keyring = sdk.createRawKeyring([{ edk, dataKey: fromHex(dataKeyHex) }])
      const message = await sdk.encrypt(keyring, fromHex(plaintextHex), { context: { made: 'in a browser' } })
      return { outcomes, message: toHex(message), node: typeof (globalThis as { process?: unknown }).process }
    },
    { vectors: manifest.vectors, plaintextHex, dataKeyHex },
  )
  await page.close()

  assert.equal(results.node, 'undefined', 'the page is a browser, with no Node globals')
  for (const vector of manifest.vectors) {
    const outcome = results.outcomes[vector.name]!
    if (vector.expectedError) assert.equal(outcome.error, vector.expectedError, vector.name)
    else if (vector.plaintext && 'hex' in vector.plaintext)
      assert.equal(outcome.hex, vector.plaintext.hex, vector.name)
    else if (vector.plaintext) {
      assert.equal(outcome.length, vector.plaintext.length, vector.name)
      assert.equal(outcome.sha256, vector.plaintext.sha256, vector.name)
    }
  }
  const opened = independentDecrypt(
    new Uint8Array(Buffer.from(results.message, 'hex')),
    () => new Uint8Array(Buffer.from(dataKeyHex, 'hex')),
  )
  assert.equal(Buffer.from(opened.plaintext).toString('hex'), plaintextHex)
  assert.deepEqual(opened.context, { made: 'in a browser' })
})
