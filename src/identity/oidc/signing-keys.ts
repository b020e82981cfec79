import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type JsonWebKey,
  type KeyObject,
  randomBytes,
} from 'node:crypto'
import type { Sql } from '../../data/database.ts'
import type { InvalidationBus } from '../../data/invalidation-bus.ts'
import { open, SealedBlobError, seal } from '../../keyring/aead.ts'
import type { MasterKeyring } from '../../keyring/master-key.ts'
import { type RewrapResult, rewrapEach } from '../../keyring/rewrap.ts'
import { type Clock, DAY_MS } from '../../platform/clock.ts'
import {
  insertSigningKeyVersion,
  listSigningKeys,
  replaceSealedSigningKey,
  type SigningKeyRow,
  signingKeysToRewrap,
} from './oidc-store.ts'

export const SIGNING_ALG = 'ES256'
const SIGNING_KEYS_TOPIC = 'oidc-signing-keys'
/**
 * A retired version stays published this long: longer than any token it signed can live (ID and
 * access tokens live at most an hour), so a relying party holding one can still verify it.
 */
const RETIRED_KEY_PUBLISHED_MS = DAY_MS

interface PublishedKey {
  kid: string
  version: number
  publicKey: KeyObject
  publicJwk: JsonWebKey
}

interface SigningKeySet {
  /** The private JWKs oidc-provider signs with, the current version first (it signs with the first). */
  privateJwks: JsonWebKey[]
  /** Every version a token may still carry: the current one and those retired within the window. */
  published: PublishedKey[]
  currentKid: string
}

/**
 * The current signing key cannot be opened: nothing can be signed, so the provider is down. The
 * message names the key and the master key; `reason` is what the public health check may say.
 */
export class SigningKeyUnavailableError extends Error {
  readonly reason:
    | 'sealed by a master key this process does not hold'
    | 'damaged: it does not open with its master key'
  constructor(reason: SigningKeyUnavailableError['reason'], kid: string, masterKeyId: string) {
    super(
      reason === 'sealed by a master key this process does not hold'
        ? `signing key ${kid} is sealed by an unknown master key ${masterKeyId}: give this process that key (KMS_MASTER_KEY_PREVIOUS or the key file) and run \`kms rotate-master-key\``
        : `signing key ${kid} does not open with master key ${masterKeyId}`,
    )
    this.reason = reason
  }
}

/**
 * The ES256 key that signs ID and access tokens, held like every key of the service: versions in
 * PostgreSQL, the private part sealed under the master keyring, rotated on a schedule (job
 * process) or on demand (CLI), the change told to every process over the invalidation bus.
 */
export interface SigningKeys {
  /** The current set (read once, then after each rotation); creates version 1 on an empty table. */
  current(): Promise<SigningKeySet>
  /** A new version now, or only when the current one is older than `olderThanDays`. */
  rotate(options?: { olderThanDays?: number }): Promise<number | undefined>
  /** Called when the set changed (here or in another process). */
  onChange(listener: () => void): void
  /**
   * Master key rotation: every version still published is sealed again under the keyring's
   * primary key (versions retired beyond the window are never opened again and stay as they are).
   * The key material does not change, so no process needs telling.
   */
  rewrapSealed(keyring: MasterKeyring): Promise<RewrapResult>
}

export function createSigningKeys(deps: {
  sql: Sql
  masterKeys: MasterKeyring
  bus: InvalidationBus
  clock: Clock
}): SigningKeys {
  const { sql, masterKeys, bus, clock } = deps
  let cached: Promise<SigningKeySet> | undefined
  const listeners = new Set<() => void>()
  const aad = (kid: string) => `kms oidc signing key v1 kid:${kid}`

  const changed = () => {
    cached = undefined
    for (const listener of listeners) listener()
  }
  bus.subscribe(SIGNING_KEYS_TOPIC, changed)
  bus.onResync(changed)

  async function addVersion(onlyIfOlderThan?: Date): Promise<number | undefined> {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const kid = randomBytes(12).toString('base64url')
    const privateJwk = { ...privateKey.export({ format: 'jwk' }), kid, alg: SIGNING_ALG, use: 'sig' }
    const publicJwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: SIGNING_ALG, use: 'sig' }
    const primary = masterKeys.primary
    const sealed = seal(primary.key, Buffer.from(JSON.stringify(privateJwk)), aad(kid))
    return sql.begin((tx) =>
      insertSigningKeyVersion(
        tx,
        { kid, alg: SIGNING_ALG, publicJwk, privateSealed: sealed, masterKeyId: primary.id },
        onlyIfOlderThan,
      ),
    )
  }

  /** The private JWK of a version, or why it cannot be had. */
  function unseal(row: SigningKeyRow): JsonWebKey | SigningKeyUnavailableError {
    const masterKey = masterKeys.find(row.master_key_id)
    if (!masterKey)
      return new SigningKeyUnavailableError(
        'sealed by a master key this process does not hold',
        row.kid,
        row.master_key_id,
      )
    let plain: Buffer
    try {
      plain = open(masterKey.key, row.private_sealed, aad(row.kid))
    } catch (err) {
      if (!(err instanceof SealedBlobError)) throw err
      return new SigningKeyUnavailableError(
        'damaged: it does not open with its master key',
        row.kid,
        row.master_key_id,
      )
    }
    const jwk = JSON.parse(plain.toString('utf8')) as JsonWebKey
    createPrivateKey({ key: jwk, format: 'jwk' })
    return jwk
  }

  function toSet(rows: SigningKeyRow[]): SigningKeySet {
    const cutoff = clock.now().getTime() - RETIRED_KEY_PUBLISHED_MS
    const live = rows.filter((row) => row.retired_at === null || row.retired_at.getTime() > cutoff)
    const privateJwks: JsonWebKey[] = []
    for (const [i, row] of live.entries()) {
      const jwk = unseal(row)
      // Only the current version signs: a retired one that cannot be opened (its master key lost)
      // leaves the provider's JWKS, while its public part still verifies what it signed (below).
      if (jwk instanceof SigningKeyUnavailableError) {
        if (i === 0) throw jwk
        continue
      }
      privateJwks.push(jwk)
    }
    const published = live.map((row) => ({
      kid: row.kid,
      version: row.version,
      publicJwk: row.public_jwk as JsonWebKey,
      publicKey: createPublicKey({ key: row.public_jwk as JsonWebKey, format: 'jwk' }),
    }))
    return { privateJwks, published, currentKid: live[0]!.kid }
  }

  async function load(): Promise<SigningKeySet> {
    let rows = await listSigningKeys(sql)
    if (!rows.some((row) => row.retired_at === null)) {
      await addVersion(new Date(0))
      rows = await listSigningKeys(sql)
    }
    return toSet(rows)
  }

  return {
    current() {
      cached ??= load().catch((err: unknown) => {
        cached = undefined
        throw err
      })
      return cached
    },
    async rotate(options = {}) {
      const olderThan =
        options.olderThanDays === undefined
          ? undefined
          : new Date(clock.now().getTime() - options.olderThanDays * DAY_MS)
      const version = await addVersion(olderThan)
      if (version !== undefined) await bus.publish(SIGNING_KEYS_TOPIC, String(version))
      return version
    },
    onChange(listener) {
      listeners.add(listener)
    },
    rewrapSealed: (keyring) =>
      rewrapEach({
        keyring,
        batch: (primaryId, after, limit) =>
          signingKeysToRewrap(sql, {
            primaryId,
            after,
            limit,
            retiredSince: new Date(clock.now().getTime() - RETIRED_KEY_PUBLISHED_MS),
          }),
        aad: (item) => aad(item.id),
        replace: (item, resealed, primary) =>
          replaceSealedSigningKey(sql, {
            kid: item.id,
            from: item.sealed,
            to: resealed,
            masterKeyId: primary.id,
          }),
      }),
  }
}
