import 'reflect-metadata'
import { randomBytes, webcrypto } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { inflateRawSync } from 'node:zlib'
import * as x509 from '@peculiar/x509'
import { SignedXml } from 'xml-crypto'

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])

export interface TestCertificate {
  /** Full PEM. */
  pem: string
  /** The Base64 body without headers or line breaks. */
  body: string
  /** PKCS#8 PEM of the private key. */
  privateKeyPem: string
}

/** A self-signed RSA certificate with the validity the test asks for (@peculiar/x509, not the service's code). */
export async function makeCertificate(
  validity: { notBefore?: Date; notAfter?: Date } = {},
  subject = 'CN=Test IdP',
): Promise<TestCertificate> {
  const algorithm = {
    name: 'RSASSA-PKCS1-v1_5',
    hash: 'SHA-256',
    publicExponent: new Uint8Array([1, 0, 1]),
    modulusLength: 2048,
  }
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair
  const now = Date.now()
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomBytes(8).toString('hex'),
    name: subject,
    notBefore: validity.notBefore ?? new Date(now - 24 * 3600_000),
    notAfter: validity.notAfter ?? new Date(now + 365 * 24 * 3600_000),
    signingAlgorithm: algorithm,
    keys,
  })
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey))
  const privateKeyPem = `-----BEGIN PRIVATE KEY-----\n${pkcs8
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trim()}\n-----END PRIVATE KEY-----\n`
  const pem = certificate.toString('pem')
  return { pem, body: Buffer.from(certificate.rawData).toString('base64'), privateKeyPem }
}

/** What the SP put in its AuthnRequest (HTTP-Redirect binding: raw DEFLATE, Base64, URL-encoded). */
export interface ReceivedAuthnRequest {
  id: string
  acsUrl: string
  issuer: string
  relayState: string | null
  xml: string
}

export function parseAuthnRequest(redirectUrl: string): ReceivedAuthnRequest {
  const url = new URL(redirectUrl)
  const encoded = url.searchParams.get('SAMLRequest')
  if (!encoded) throw new Error(`no SAMLRequest in ${redirectUrl}`)
  const xml = inflateRawSync(Buffer.from(encoded, 'base64')).toString('utf8')
  const attribute = (name: string) => new RegExp(`${name}="([^"]+)"`).exec(xml)?.[1]
  const issuer = /<(?:saml:)?Issuer[^>]*>([^<]+)<\/(?:saml:)?Issuer>/.exec(xml)?.[1]
  const id = attribute('ID')
  const acsUrl = attribute('AssertionConsumerServiceURL')
  if (!id || !acsUrl || !issuer) throw new Error(`an incomplete AuthnRequest:\n${xml}`)
  return { id, acsUrl, issuer, relayState: url.searchParams.get('RelayState'), xml }
}

export interface ResponseOptions {
  request: Pick<ReceivedAuthnRequest, 'id' | 'acsUrl' | 'issuer'>
  issuer: string
  nameId: string
  attributes?: Record<string, string>
  /** The key that signs (default: the IdP's own). */
  signingKey?: TestCertificate
  signResponse?: boolean
  signAssertion?: boolean
  audience?: string
  destination?: string
  recipient?: string
  notBefore?: Date
  notOnOrAfter?: Date
  assertionId?: string
}

const xmlEscape = (value: string) =>
  value.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!)

const SIGNATURE = {
  signatureAlgorithm: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
  canonicalizationAlgorithm: 'http://www.w3.org/2001/10/xml-exc-c14n#',
}
const REFERENCE = {
  digestAlgorithm: 'http://www.w3.org/2001/04/xmlenc#sha256',
  transforms: [
    'http://www.w3.org/2000/09/xmldsig#enveloped-signature',
    'http://www.w3.org/2001/10/xml-exc-c14n#',
  ],
}

function sign(xml: string, key: TestCertificate, element: 'Assertion' | 'Response'): string {
  const signer = new SignedXml({ ...SIGNATURE, privateKey: key.privateKeyPem, publicCert: key.pem })
  const path = element === 'Response' ? "/*[local-name(.)='Response']" : "//*[local-name(.)='Assertion']"
  signer.addReference({ ...REFERENCE, xpath: path })
  signer.computeSignature(xml, {
    location: { reference: `${path}/*[local-name(.)='Issuer']`, action: 'after' },
  })
  return signer.getSignedXml()
}

/**
 * A SAML 2.0 Response as an IdP writes it: a bearer assertion with subject confirmation,
 * conditions and audience, an authentication statement and attributes; the assertion and then
 * the response signed (RSA-SHA256, exclusive C14N, enveloped), unless the test says otherwise.
 * Answers the Base64 the browser would post.
 */
export function buildResponse(options: ResponseOptions, idpKey: TestCertificate): string {
  const now = Date.now()
  const instant = new Date(now).toISOString()
  const notBefore = (options.notBefore ?? new Date(now - 60_000)).toISOString()
  const notOnOrAfter = (options.notOnOrAfter ?? new Date(now + 5 * 60_000)).toISOString()
  const destination = options.destination ?? options.request.acsUrl
  const audience = options.audience ?? options.request.issuer
  const responseId = `_r${randomBytes(16).toString('hex')}`
  const assertionId = options.assertionId ?? `_a${randomBytes(16).toString('hex')}`
  const attributes = Object.entries(options.attributes ?? {})
    .map(
      ([name, value]) =>
        `<saml:Attribute Name="${xmlEscape(name)}" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:basic"><saml:AttributeValue>${xmlEscape(value)}</saml:AttributeValue></saml:Attribute>`,
    )
    .join('')
  let assertion = `<saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${assertionId}" Version="2.0" IssueInstant="${instant}"><saml:Issuer>${xmlEscape(options.issuer)}</saml:Issuer><saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">${xmlEscape(options.nameId)}</saml:NameID><saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData InResponseTo="${options.request.id}" NotOnOrAfter="${notOnOrAfter}" Recipient="${xmlEscape(options.recipient ?? options.request.acsUrl)}"/></saml:SubjectConfirmation></saml:Subject><saml:Conditions NotBefore="${notBefore}" NotOnOrAfter="${notOnOrAfter}"><saml:AudienceRestriction><saml:Audience>${xmlEscape(audience)}</saml:Audience></saml:AudienceRestriction></saml:Conditions><saml:AuthnStatement AuthnInstant="${instant}" SessionIndex="${assertionId}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement><saml:AttributeStatement>${attributes}</saml:AttributeStatement></saml:Assertion>`
  const key = options.signingKey ?? idpKey
  if (options.signAssertion !== false) assertion = sign(assertion, key, 'Assertion')
  let response = `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${responseId}" Version="2.0" IssueInstant="${instant}" Destination="${xmlEscape(destination)}" InResponseTo="${options.request.id}"><saml:Issuer>${xmlEscape(options.issuer)}</saml:Issuer><samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>${assertion}</samlp:Response>`
  if (options.signResponse !== false) response = sign(response, key, 'Response')
  return Buffer.from(response, 'utf8').toString('base64')
}

/**
 * A local IdP over HTTP for the browser: GET /sso takes the AuthnRequest and answers a page whose
 * Continue button posts a signed response for `user` to the ACS (HTTP-POST binding). Real IdPs
 * submit that form by script; a button lets the test do it explicitly.
 */
export interface TestSamlIdp {
  entityId: string
  ssoUrl: string
  key: TestCertificate
  requests: ReceivedAuthnRequest[]
  user: { nameId: string; attributes: Record<string, string> }
  stop(): Promise<void>
}

export async function startSamlIdp(user: TestSamlIdp['user']): Promise<TestSamlIdp> {
  const key = await makeCertificate()
  const idp: TestSamlIdp = { entityId: '', ssoUrl: '', key, requests: [], user, stop: async () => {} }
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', idp.ssoUrl)
    if (req.method !== 'GET' || url.pathname !== '/sso') {
      res.writeHead(404).end()
      return
    }
    const request = parseAuthnRequest(url.toString())
    idp.requests.push(request)
    const response = buildResponse(
      { request, issuer: idp.entityId, nameId: idp.user.nameId, attributes: idp.user.attributes },
      key,
    )
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
    res.end(`<!DOCTYPE html><html><head><title>Test IdP</title></head><body>
<form id="saml" method="post" action="${xmlEscape(request.acsUrl)}">
<input type="hidden" name="SAMLResponse" value="${response}">
${request.relayState ? `<input type="hidden" name="RelayState" value="${xmlEscape(request.relayState)}">` : ''}
<button type="submit">Continue</button>
</form></body></html>`)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  idp.entityId = `${base}/metadata`
  idp.ssoUrl = `${base}/sso`
  idp.stop = () => new Promise<void>((resolve) => server.close(() => resolve()))
  return idp
}
