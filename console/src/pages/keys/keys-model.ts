import { fetchWithToken, type Schemas } from '../../api/client.ts'
import type { operations } from '../../api/schema.ts'
import type { KeysSearch } from '../../search.ts'

/** The Keys area's vocabulary, read from the API's schema (docs/keys.md, spec 2.1 and 2.2). */
export type Key = Schemas['KeyView']
export type KeyType = Key['keyType']
export type Algorithm = Key['algorithm']
export type KeyState = Key['state']

export const KEY_TYPES: ReadonlyArray<{ id: KeyType; label: string; description: string }> = [
  { id: 'Encryption', label: 'Encryption', description: 'Encrypt and decrypt data, data keys and wrapping' },
  { id: 'Signing', label: 'Signing', description: 'Sign data and verify signatures' },
  { id: 'HMAC', label: 'HMAC', description: 'Compute and verify message authentication codes' },
]

/**
 * Every algorithm of the schema's enum (a Record over it: a new algorithm in the API fails the
 * type-check here until it is described), with the key types it serves (docs/keys.md).
 */
const ALGORITHMS: Record<Algorithm, { types: readonly KeyType[]; description: string }> = {
  'ML-KEM-512': { types: ['Encryption'], description: 'Post-quantum, FIPS 203, category 1' },
  'ML-KEM-768': { types: ['Encryption'], description: 'Post-quantum, FIPS 203, category 3 (default)' },
  'ML-KEM-1024': { types: ['Encryption'], description: 'Post-quantum, FIPS 203, category 5' },
  'ML-DSA-44': { types: ['Signing'], description: 'Post-quantum, FIPS 204, category 2' },
  'ML-DSA-65': { types: ['Signing'], description: 'Post-quantum, FIPS 204, category 3 (default)' },
  'ML-DSA-87': { types: ['Signing'], description: 'Post-quantum, FIPS 204, category 5' },
  'SLH-DSA-128s': { types: ['Signing'], description: 'Post-quantum, FIPS 205, hash-based' },
  'RSA-2048': { types: ['Encryption', 'Signing'], description: 'Classical RSA, 2048-bit modulus' },
  'RSA-3072': { types: ['Encryption', 'Signing'], description: 'Classical RSA, 3072-bit modulus' },
  'RSA-4096': { types: ['Encryption', 'Signing'], description: 'Classical RSA, 4096-bit modulus' },
  'EC-P256': { types: ['Signing'], description: 'Classical ECDSA on P-256' },
  'EC-P384': { types: ['Signing'], description: 'Classical ECDSA on P-384' },
  'EC-P521': { types: ['Signing'], description: 'Classical ECDSA on P-521' },
  Ed25519: { types: ['Signing'], description: 'Classical EdDSA' },
  'HMAC-SHA256': { types: ['HMAC'], description: 'HMAC with SHA-256' },
  'HMAC-SHA384': { types: ['HMAC'], description: 'HMAC with SHA-384' },
  'HMAC-SHA512': { types: ['HMAC'], description: 'HMAC with SHA-512' },
  'AES-128-GCM': { types: ['Encryption'], description: 'Symmetric AES-GCM, 128-bit key' },
  'AES-192-GCM': { types: ['Encryption'], description: 'Symmetric AES-GCM, 192-bit key' },
  'AES-256-GCM': { types: ['Encryption'], description: 'Symmetric AES-GCM, 256-bit key' },
  'X-Wing': { types: ['Encryption'], description: 'Hybrid post-quantum KEM: ML-KEM-768 + X25519' },
}

export const ALL_ALGORITHMS = Object.keys(ALGORITHMS) as Algorithm[]

/** What the form preselects for a type (the API's defaults; HMAC has none, SHA-256 is offered). */
export const DEFAULT_ALGORITHM: Record<KeyType, Algorithm> = {
  Encryption: 'ML-KEM-768',
  Signing: 'ML-DSA-65',
  HMAC: 'HMAC-SHA256',
}

export const algorithmsOf = (type: KeyType | undefined): Algorithm[] =>
  ALL_ALGORITHMS.filter((name) => type === undefined || ALGORITHMS[name].types.includes(type))

export const algorithmOptions = (type: KeyType | undefined) =>
  algorithmsOf(type).map((name) => ({ id: name, label: name, description: ALGORITHMS[name].description }))

export const KEY_STATES: readonly KeyState[] = [
  'Active',
  'Expired',
  'Revoked',
  'Pending Deletion',
  'Destroyed',
]

export const isKeyType = (value: unknown): value is KeyType => KEY_TYPES.some((type) => type.id === value)
const isAlgorithm = (value: unknown): value is Algorithm =>
  typeof value === 'string' && Object.hasOwn(ALGORITHMS, value)
const isKeyState = (value: unknown): value is KeyState =>
  typeof value === 'string' && (KEY_STATES as readonly string[]).includes(value)

/** The list's sort columns (GET /keys `sort`), as the URL carries them: `<column>:<asc|desc>`. */
export type ListQuery = operations['listKeys']['parameters']['query']
type SortColumn = ListQuery['sort']
const SORT_COLUMNS: readonly SortColumn[] = ['name', 'algorithm', 'purpose', 'version', 'status', 'createdAt']

export interface ListFilters {
  search: string | undefined
  keyType: KeyType | undefined
  algorithm: Algorithm | undefined
  status: KeyState | undefined
  labels: string[]
  sort: SortColumn
  order: 'asc' | 'desc'
}

/** The list's filters from the URL; values the API would refuse are ignored. */
export function listFilters(search: KeysSearch): ListFilters {
  const [column, order] = (search.sort ?? '').split(':')
  const sort = SORT_COLUMNS.find((name) => name === column) ?? 'createdAt'
  return {
    search: search.q,
    keyType: isKeyType(search.type) ? search.type : undefined,
    algorithm: isAlgorithm(search.algorithm) ? search.algorithm : undefined,
    status: isKeyState(search.status) ? search.status : undefined,
    labels: search.labels ?? [],
    sort,
    order: order === 'asc' || order === 'desc' ? order : sort === 'createdAt' ? 'desc' : 'asc',
  }
}

/** Day arithmetic for expiry presets and banners. */
export const DAY_MS = 24 * 60 * 60 * 1000

export function daysUntil(iso: string, now = Date.now()): number {
  return Math.ceil((new Date(iso).getTime() - now) / DAY_MS)
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' })
const dateOnly = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' })

export const formatDateTime = (iso: string | null | undefined): string =>
  iso ? dateTime.format(new Date(iso)) : '—'
export const formatDate = (iso: string | null | undefined): string =>
  iso ? dateOnly.format(new Date(iso)) : '—'

/** Expiry presets (spec 2.2: 30 days, 90 days, 1 year, custom date, none). */
export type ExpiryPreset = 'none' | '30' | '90' | '365' | 'custom'
export interface Expiry {
  preset: ExpiryPreset
  /** yyyy-mm-dd, for `custom`. */
  date: string
}

export const EXPIRY_PRESETS: ReadonlyArray<{ id: ExpiryPreset; label: string }> = [
  { id: 'none', label: 'No expiry' },
  { id: '30', label: '30 days' },
  { id: '90', label: '90 days' },
  { id: '365', label: '1 year' },
  { id: 'custom', label: 'Custom date' },
]

/**
 * The expiresAt an expiry choice sends: now plus the preset's days, or the end of the custom day in
 * the person's time zone; undefined for none. `problem` says what is wrong with a custom date.
 */
export function expiresAtOf(expiry: Expiry, now = Date.now()): { value?: string; problem?: string } {
  if (expiry.preset === 'none') return {}
  if (expiry.preset !== 'custom')
    return { value: new Date(now + Number(expiry.preset) * DAY_MS).toISOString() }
  if (!/^\d{4}-\d{2}-\d{2}$/.test(expiry.date)) return { problem: 'Choose the day the key expires' }
  const end = new Date(`${expiry.date}T23:59:59`)
  if (Number.isNaN(end.getTime())) return { problem: 'Choose the day the key expires' }
  if (end.getTime() <= now) return { problem: 'The expiry date must be in the future' }
  return { value: end.toISOString() }
}

/** A label as the API takes it: 1 to 64 printable characters, at most 50 per key. */
const MAX_LABELS = 50
export function labelProblem(label: string, labels: readonly string[]): string | undefined {
  if (label.length === 0) return 'Type a label first'
  if (label.length > 64) return 'A label has at most 64 characters'
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\u0000-\u001f\u007f]/.test(label)) return 'A label cannot contain control characters'
  if (labels.includes(label)) return `“${label}” is already there`
  if (labels.length >= MAX_LABELS) return `A key has at most ${MAX_LABELS} labels`
  return undefined
}

/**
 * A message for the page the person lands on after an action elsewhere (a key created or
 * imported, then its detail page opens). Memory only: it never reaches the URL or storage.
 */
let flash: { keyId: string; message: string } | undefined
export function setFlash(keyId: string, message: string): void {
  flash = { keyId, message }
}
export function takeFlash(keyId: string): string | undefined {
  if (flash?.keyId !== keyId) return undefined
  const { message } = flash
  flash = undefined
  return message
}

/** Saves a Blob as a file through a temporary <a download> (no navigation, nothing inline). */
export function saveBlob(blob: Blob, fileName: string): void {
  const url = URL.createObjectURL(blob)
  const link = document.createElement('a')
  link.href = url
  link.download = fileName
  link.hidden = true
  document.body.append(link)
  link.click()
  link.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

/** The file name of a Content-Disposition header, or the fallback. */
function fileNameOf(response: Response, fallback: string): string {
  const header = response.headers.get('content-disposition') ?? ''
  return /filename="([^"]+)"/.exec(header)?.[1] ?? fallback
}

export type PublicFormat = 'PEM' | 'DER' | 'RAW' | 'JWK'
export const PUBLIC_FORMATS: ReadonlyArray<{ id: PublicFormat; label: string; description: string }> = [
  { id: 'PEM', label: 'PEM (.pem)', description: 'SPKI as Base64 text with header and footer' },
  { id: 'DER', label: 'DER (.der)', description: 'SPKI as binary ASN.1' },
  { id: 'RAW', label: 'RAW (.txt)', description: 'The raw public key bytes as Base64 text' },
  { id: 'JWK', label: 'JWK (.json)', description: 'A JSON Web Key (RFC 7517)' },
]
const PUBLIC_EXTENSIONS: Record<PublicFormat, string> = { PEM: 'pem', DER: 'der', RAW: 'txt', JWK: 'json' }

export const publicDownloadPath = (keyId: string, format: PublicFormat, version?: number) =>
  `/api/v1/keys/${keyId}/public/download?format=${format}${version ? `&version=${version}` : ''}`

/** Downloads the public key file the API names (GET /keys/{id}/public/download). */
export async function downloadPublicKey(key: Key, format: PublicFormat, version?: number): Promise<string> {
  const response = await fetchWithToken(publicDownloadPath(key.id, format, version))
  const name = fileNameOf(response, `${key.name}-v${version ?? key.version}.${PUBLIC_EXTENSIONS[format]}`)
  saveBlob(await response.blob(), name)
  return name
}

/** Base64 of bytes (file contents for DER and RAW import). */
export function base64Of(bytes: Uint8Array): string {
  let binary = ''
  for (let i = 0; i < bytes.length; i += 0x8000)
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(binary)
}

export function bytesOfBase64(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text.replace(/\s+/g, ''))
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}
