import type { EntropyConfig, EntropySourceConfig } from '../config.ts'
import type { OutboundClient } from '../outbound/outbound-client.ts'
import { isLoopbackHost } from '../platform/urls.ts'
import { createAqnClient } from './aqn-client.ts'
import {
  createEntropyChain,
  type EntropyChain,
  type EntropyLogger,
  type RemoteSourceName,
} from './entropy-chain.ts'
import type { EntropyClient } from './entropy-client.ts'
import { createQryptClient } from './qrypt-client.ts'

function client(
  name: RemoteSourceName,
  source: EntropySourceConfig | undefined,
  config: EntropyConfig,
  logger: EntropyLogger,
  http: OutboundClient | undefined,
): EntropyClient | undefined {
  if (!source) return undefined
  const url = new URL(source.url)
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname)) {
    // Allowed for an on-premises appliance, but the credential then crosses the network in clear.
    logger.warn({ source: name, protocol: source.protocol }, 'entropy source uses plain http')
  }
  const options = {
    url: source.url,
    credential: source.credential,
    timeoutMs: config.timeoutMs,
    ...(http ? { http } : {}),
  }
  return source.protocol === 'anu-aqn' ? createAqnClient(options) : createQryptClient(options)
}

/** The chain the service runs: with no source configured, the pooled system CSPRNG alone. */
export function createEntropyChainFromConfig(
  config: EntropyConfig,
  logger: EntropyLogger,
  /** The service's outbound client; each source adds its own host to what it allows. */
  http?: OutboundClient,
): EntropyChain {
  const primary = client('qrng-primary', config.primary, config, logger, http)
  const secondary = client('qrng-secondary', config.secondary, config, logger, http)
  logger.info(
    {
      primary: config.primary?.protocol ?? 'none',
      secondary: config.secondary?.protocol ?? 'none',
      poolBytes: config.poolBytes,
    },
    'entropy chain configured',
  )
  return createEntropyChain({
    primary,
    secondary,
    logger,
    poolBytes: config.poolBytes,
    refillIntervalMs: config.refillIntervalMs,
    retryMs: config.retryMs,
    retryMaxMs: config.retryMaxMs,
  })
}
