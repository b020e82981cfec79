import 'reflect-metadata'
import assert from 'node:assert/strict'
import { X509Certificate } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import * as x509 from '@peculiar/x509'
import { pemToDer } from '../helpers/der.ts'
import {
  type HttpResult,
  startTestService,
  type TenantWithKey,
  type TestService,
} from '../helpers/service.ts'
import { TLS_GREETING, type TlsClientOutcome, tlsPeers } from '../helpers/tls-peer.ts'

/**
 * Issue 36 acceptance: a TLS handshake between two node processes with an ECDSA chain the
 * service issued (an EC P-256 root, an intermediate under it, a server leaf with a generated
 * key), refused after the leaf's revocation by a client that checks the CRLs.
 *
 * Nothing here trusts the service's own reading of what it issued: the handshakes are OpenSSL's
 * (Node's tls in separate processes, the client given the root as its only anchor and the CRLs
 * fetched from the URLs the certificates name), the chain and the AIA are read with
 * node:crypto's X509Certificate, the CRL distribution points with @peculiar/x509, and the CRLs
 * are parsed and their signatures checked with @peculiar/x509.
 */

/** The URIs of a certificate's CRL distribution points, read with @peculiar/x509. */
function distributionPoints(pem: string): string[] {
  const extension = new x509.X509Certificate(pem).getExtension(x509.CRLDistributionPointsExtension)
  assert.ok(extension, 'the certificate has a CRL distribution points extension')
  return extension.distributionPoints.flatMap((point) =>
    (point.distributionPoint?.fullName ?? []).flatMap((name) =>
      name.uniformResourceIdentifier ? [name.uniformResourceIdentifier] : [],
    ),
  )
}

/** The CRL number (2.5.29.20) of a CRL, read with @peculiar/x509. */
function crlNumber(crl: x509.X509Crl): bigint {
  const extension = crl.extensions.find((e) => e.type === '2.5.29.20')
  assert.ok(extension, 'the CRL has a CRL number')
  // The extnValue is an INTEGER: tag 0x02, a short length, the big-endian bytes.
  const value = Buffer.from(extension.value)
  assert.equal(value[0], 0x02)
  return BigInt(`0x${value.subarray(2).toString('hex') || '0'}`)
}

describe('PKI: TLS between two processes with a chain the service issued, refused once revoked', () => {
  let svc: TestService
  let tenant: TenantWithKey
  const peers = tlsPeers()

  const api = async (method: string, path: string, body?: unknown, expected = 200): Promise<HttpResult> => {
    const response = await svc.request(method, `/api/v1${path}`, {
      key: tenant.key,
      ...(body === undefined ? {} : { body }),
    })
    assert.equal(response.status, expected, `${method} ${path}: ${response.text}`)
    return response
  }

  /** A CRL as a relying party gets it: from the URL, without a credential, as PEM. */
  async function fetchCrl(url: string): Promise<{ pem: string; crl: x509.X509Crl }> {
    const response = await fetch(`${url}?format=pem`)
    assert.equal(response.status, 200, `GET ${url}`)
    const pem = await response.text()
    assert.match(pem, /^-----BEGIN X509 CRL-----\n/)
    // The DER form at the same URL is the same CRL (the default format).
    const der = Buffer.from(await (await fetch(url)).arrayBuffer())
    assert.deepEqual(der, pemToDer(pem))
    return { pem, crl: new x509.X509Crl(pem) }
  }

  let root: { id: string; certificate: string }
  let intermediate: { id: string; certificate: string }
  let leaf: { serial: string; certificate: string; chain: string[]; privateKey: string }
  let leafCrlUrl: string
  let rootCrlUrl: string
  let server: { port: number }

  before(async () => {
    svc = await startTestService()
    tenant = await svc.createTenant()
    const createdRoot = await api(
      'POST',
      '/cas',
      { name: 'tls-root', type: 'root', algorithm: 'EC-P256', subject: { commonName: 'TLS Test Root' } },
      201,
    )
    root = createdRoot.body
    const createdIntermediate = await api(
      'POST',
      '/cas',
      {
        name: 'tls-intermediate',
        type: 'intermediate',
        algorithm: 'EC-P256',
        parentId: root.id,
        subject: { commonName: 'TLS Test Intermediate' },
      },
      201,
    )
    intermediate = createdIntermediate.body
    await api(
      'POST',
      `/cas/${intermediate.id}/roles`,
      { name: 'local-server', allowedDomains: ['localhost'], allowBareDomains: true, allowIpSans: true },
      201,
    )
    const issued = await api(
      'POST',
      '/certificates',
      {
        caId: intermediate.id,
        role: 'local-server',
        dnsNames: ['localhost'],
        ipAddresses: ['127.0.0.1'],
        keyAlgorithm: 'EC-P256',
      },
      201,
    )
    leaf = issued.body
    assert.equal(typeof leaf.privateKey, 'string', 'a generated key is answered once')
  })

  after(async () => {
    await peers.stop()
    await svc?.stop()
  })

  test('the chain is ECDSA P-256 throughout, leaf → intermediate → root, as node:crypto reads it', () => {
    const leafCert = new X509Certificate(leaf.certificate)
    const intermediateCert = new X509Certificate(intermediate.certificate)
    const rootCert = new X509Certificate(root.certificate)
    assert.deepEqual(leaf.chain, [intermediate.certificate, root.certificate])
    for (const cert of [leafCert, intermediateCert, rootCert]) {
      assert.equal(cert.publicKey.asymmetricKeyType, 'ec')
      assert.equal(cert.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1')
    }
    assert.ok(leafCert.checkIssued(intermediateCert) && leafCert.verify(intermediateCert.publicKey))
    assert.ok(intermediateCert.checkIssued(rootCert) && intermediateCert.verify(rootCert.publicKey))
    assert.ok(rootCert.verify(rootCert.publicKey), 'the root is self-signed')
    assert.equal(leafCert.ca, false)
    assert.equal(intermediateCert.ca, true)
    assert.equal(leafCert.checkHost('localhost'), 'localhost')
    assert.equal(leafCert.checkIP('127.0.0.1'), '127.0.0.1')
    assert.equal(BigInt(`0x${leafCert.serialNumber}`), BigInt(`0x${leaf.serial}`))
  })

  test('the CRL URLs the certificates name are the service’s public CRL routes of their issuers', async () => {
    const leafPoints = distributionPoints(leaf.certificate)
    assert.equal(leafPoints.length, 1)
    leafCrlUrl = leafPoints[0]!
    assert.equal(leafCrlUrl, `${svc.baseUrl}/api/v1/cas/${intermediate.id}/crl`)
    const intermediatePoints = distributionPoints(intermediate.certificate)
    assert.equal(intermediatePoints.length, 1)
    rootCrlUrl = intermediatePoints[0]!
    assert.equal(rootCrlUrl, `${svc.baseUrl}/api/v1/cas/${root.id}/crl`)
    // A second reading, of the bytes: the URL is a uniformResourceIdentifier ([6] IA5String) of the leaf.
    const uri = Buffer.from(leafCrlUrl, 'ascii')
    const encoded = Buffer.concat([Buffer.of(0x86, uri.length), uri])
    assert.ok(pemToDer(leaf.certificate).includes(encoded), 'the leaf holds the URL as a GeneralName URI')

    // node:crypto reads the AIA: the issuer's certificate, public at the URL the leaf names.
    const issuerUrl = `${svc.baseUrl}/api/v1/cas/${intermediate.id}/certificate`
    const ocspUrl = `${svc.baseUrl}/api/v1/cas/${intermediate.id}/ocsp`
    assert.equal(
      new X509Certificate(leaf.certificate).infoAccess,
      `OCSP - URI:${ocspUrl}\nCA Issuers - URI:${issuerUrl}`,
    )
    const issuerDer = Buffer.from(await (await fetch(issuerUrl)).arrayBuffer())
    assert.deepEqual(issuerDer, pemToDer(intermediate.certificate))
  })

  test('before revocation: the handshake succeeds with the root and both CRLs; without the root it is refused', async () => {
    server = await peers.server({
      key: leaf.privateKey,
      certificateChain: leaf.certificate + intermediate.certificate,
    })
    const leafCrl = await fetchCrl(leafCrlUrl)
    const rootCrl = await fetchCrl(rootCrlUrl)
    // Independent reading of what the client is given: signed by the issuers, listing nothing yet.
    assert.ok(await leafCrl.crl.verify({ publicKey: new x509.X509Certificate(intermediate.certificate) }))
    assert.ok(await rootCrl.crl.verify({ publicKey: new x509.X509Certificate(root.certificate) }))
    assert.equal(leafCrl.crl.entries.length, 0)

    const accepted = await peers.client({
      port: server.port,
      servername: 'localhost',
      ca: [root.certificate],
      crl: [leafCrl.pem, rootCrl.pem],
    })
    assert.deepEqual(accepted, {
      authorized: true,
      greeting: TLS_GREETING,
      peerSerial: new X509Certificate(leaf.certificate).serialNumber,
    } satisfies TlsClientOutcome)

    // Node's bundled public roots only: the chain is really checked, not merely received.
    const stranger = await peers.client({ port: server.port, servername: 'localhost' })
    assert.equal(stranger.authorized, false)
    assert.equal((stranger as { code: string }).code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY')

    // The right root, but a name the leaf does not carry: the SANs are checked too.
    const wrongName = await peers.client({
      port: server.port,
      servername: 'example.com',
      ca: [root.certificate],
      crl: [leafCrl.pem, rootCrl.pem],
    })
    assert.equal(wrongName.authorized, false)
    assert.equal((wrongName as { code: string }).code, 'ERR_TLS_CERT_ALTNAME_INVALID')

    // Given CRLs, OpenSSL checks every certificate of the chain: without the root's CRL the
    // intermediate cannot be checked, so the root's CRL the test fetched is one it really uses.
    const leafCrlOnly = await peers.client({
      port: server.port,
      servername: 'localhost',
      ca: [root.certificate],
      crl: [leafCrl.pem],
    })
    assert.equal(leafCrlOnly.authorized, false)
    assert.equal((leafCrlOnly as { code: string }).code, 'UNABLE_TO_GET_CRL')
  })

  test('after POST /certificates/{serial}/revoke the new CRL lists the leaf and the client refuses it: CERT_REVOKED', async () => {
    const before = await fetchCrl(leafCrlUrl)
    const revoked = await api('POST', `/certificates/${leaf.serial}/revoke`, { reason: 'keyCompromise' })
    assert.equal(revoked.body.serial, leaf.serial)
    assert.equal(revoked.body.caId, intermediate.id)
    assert.equal(revoked.body.revocationReason, 'keyCompromise')

    // The CRL is rebuilt before the answer: fetched at once, it lists the leaf.
    const after = await fetchCrl(leafCrlUrl)
    assert.ok(await after.crl.verify({ publicKey: new x509.X509Certificate(intermediate.certificate) }))
    assert.ok(crlNumber(after.crl) > crlNumber(before.crl), 'the CRL number increases')
    const entry = after.crl.findRevoked(new x509.X509Certificate(leaf.certificate))
    assert.ok(entry, 'the new CRL lists the leaf')
    assert.equal(entry.reason, x509.X509CrlReason.keyCompromise)
    const rootCrl = await fetchCrl(rootCrlUrl)

    const refused = await peers.client({
      port: server.port,
      servername: 'localhost',
      ca: [root.certificate],
      crl: [after.pem, rootCrl.pem],
    })
    assert.equal(refused.authorized, false)
    assert.equal((refused as { code: string }).code, 'CERT_REVOKED')

    // The same client with the CRL from before the revocation still accepts the same server:
    // the refusal comes from the new CRL, not from anything else that changed.
    const stale = await peers.client({
      port: server.port,
      servername: 'localhost',
      ca: [root.certificate],
      crl: [before.pem, rootCrl.pem],
    })
    assert.equal(stale.authorized, true)
  })
})
