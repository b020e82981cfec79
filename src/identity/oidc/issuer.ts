/**
 * The provider's issuer: ID_URL when set, otherwise the URL the service listens on, known only
 * once it listens (server/api-process.ts). Every link the service e-mails and every document the
 * provider publishes starts with it, so the modules that e-mail links read it from here, built
 * before any of them.
 */
export interface Issuer {
  /** The issuer URL; throws while it is not known yet (the service is not listening). */
  url(): string
  /** The listening URL, once known; ignored when ID_URL fixed the issuer. */
  set(url: string): void
}

export function createIssuer(idUrl: string | undefined): Issuer {
  let issuer = idUrl
  return {
    url() {
      if (!issuer) throw new Error('the OpenID provider has no issuer yet (the service is not listening)')
      return issuer
    },
    set(url) {
      if (idUrl) return
      issuer = url.replace(/\/+$/, '')
    },
  }
}
