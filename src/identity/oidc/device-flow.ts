import { normalizeIP } from '@fastify/rate-limit'
import type { Configuration, KoaContextWithOIDC } from 'oidc-provider'
import type { MembershipRoles } from '../../auth/bearer-authenticator.ts'
import type { Sql } from '../../data/database.ts'
import type { Clock } from '../../platform/clock.ts'
import type { TenantService } from '../../tenants/tenant-service.ts'
import type { Locale } from '../../web/i18n.ts'
import { esc, type PageContext, pageContext, renderPage } from '../../web/layout.ts'
import {
  lockSpentCounters,
  releaseAttempt,
  reserveAttempt,
  type ThrottleCounter,
} from '../accounts/account-store.ts'

/*
 * The device authorization grant (RFC 8628) as the `kms` command line uses it (`kms login
 * --device`): the pages where a person types the code the terminal shows, confirms which client
 * and tenant ask, and is told it worked, in the sign-in pages' frame and under their CSP (no
 * script: the provider's own forms carry an inline handler and auto-submit by script, so they are
 * not used). Guessing codes is bounded per client address with the sign-in throttle's counters.
 */

/**
 * Wrong user codes per client address (IPv6 per /64) in the window before the address is locked
 * out of the code page for `lockMs`. A user code has 20^8 values and lives ten minutes.
 */
export const USER_CODE_THROTTLE = { perAddressLimit: 10, windowMs: 15 * 60_000, lockMs: 15 * 60_000 } as const
const THROTTLE_SUBJECT = 'device-user-code'

const EN = {
  inputTitle: 'Connect a device',
  inputPrompt: 'Enter the code your terminal shows (kms login --device).',
  code: 'Code',
  continue: 'Continue',
  notFound: 'That code is not right. Check it and try again.',
  expired: 'That code has expired. Start again in your terminal.',
  used: 'That code was already used. Start again in your terminal.',
  aborted: 'The sign-in was cancelled: the device got nothing.',
  failed: 'The sign-in did not complete: {detail}',
  tooMany: 'Too many wrong codes were tried from your network. Wait 15 minutes, then try again.',
  confirmTitle: 'Confirm the sign-in',
  confirmAsk: '{client} asks to sign in with your account to the tenant {tenant}.',
  confirmCode: 'Continue only if your terminal shows this code:',
  confirmWarning:
    'Only continue if you started this sign-in yourself. If someone sent you this code or link, stop: continuing would give them your access to this tenant.',
  confirmFrom: 'Requested from the address {ip} at {time}.',
  confirmAgent:
    'The device describes itself as {agent} (reported by the device, not verified: anyone can send any text).',
  cancel: 'Cancel',
  successTitle: 'Device signed in',
  successText:
    '{client} is signed in to the tenant {tenant}. You can close this window and return to your terminal.',
}
type DeviceMessages = typeof EN

const MESSAGES: Record<Locale, DeviceMessages> = {
  en: EN,
  es: {
    inputTitle: 'Conectar un dispositivo',
    inputPrompt: 'Introduce el código que muestra tu terminal (kms login --device).',
    code: 'Código',
    continue: 'Continuar',
    notFound: 'Ese código no es correcto. Compruébalo y vuelve a intentarlo.',
    expired: 'Ese código ha caducado. Empieza de nuevo en tu terminal.',
    used: 'Ese código ya se usó. Empieza de nuevo en tu terminal.',
    aborted: 'El inicio de sesión se canceló: el dispositivo no recibió nada.',
    failed: 'El inicio de sesión no se completó: {detail}',
    tooMany: 'Se probaron demasiados códigos erróneos desde tu red. Espera 15 minutos y vuelve a intentarlo.',
    confirmTitle: 'Confirma el inicio de sesión',
    confirmAsk: '{client} pide iniciar sesión con tu cuenta en el tenant {tenant}.',
    confirmCode: 'Continúa solo si tu terminal muestra este código:',
    confirmWarning:
      'Continúa solo si iniciaste tú este inicio de sesión. Si alguien te envió este código o enlace, detente: continuar le daría tu acceso a este tenant.',
    confirmFrom: 'Solicitado desde la dirección {ip} a las {time}.',
    confirmAgent:
      'El dispositivo se describe como {agent} (lo indica el dispositivo, sin verificar: cualquiera puede enviar cualquier texto).',
    cancel: 'Cancelar',
    successTitle: 'Dispositivo conectado',
    successText:
      '{client} ha iniciado sesión en el tenant {tenant}. Puedes cerrar esta ventana y volver a tu terminal.',
  },
  fr: {
    inputTitle: 'Connecter un appareil',
    inputPrompt: 'Saisissez le code affiché par votre terminal (kms login --device).',
    code: 'Code',
    continue: 'Continuer',
    notFound: 'Ce code n’est pas correct. Vérifiez-le et réessayez.',
    expired: 'Ce code a expiré. Recommencez dans votre terminal.',
    used: 'Ce code a déjà été utilisé. Recommencez dans votre terminal.',
    aborted: 'La connexion a été annulée : l’appareil n’a rien reçu.',
    failed: 'La connexion n’a pas abouti : {detail}',
    tooMany:
      'Trop de codes erronés ont été essayés depuis votre réseau. Attendez 15 minutes, puis réessayez.',
    confirmTitle: 'Confirmer la connexion',
    confirmAsk: '{client} demande à se connecter avec votre compte au tenant {tenant}.',
    confirmCode: 'Continuez seulement si votre terminal affiche ce code :',
    confirmWarning:
      'Continuez seulement si vous avez lancé cette connexion vous-même. Si quelqu’un vous a envoyé ce code ou ce lien, arrêtez : continuer lui donnerait votre accès à ce tenant.',
    confirmFrom: 'Demandé depuis l’adresse {ip} à {time}.',
    confirmAgent:
      'L’appareil se décrit comme {agent} (indiqué par l’appareil, non vérifié : n’importe qui peut envoyer n’importe quel texte).',
    cancel: 'Annuler',
    successTitle: 'Appareil connecté',
    successText:
      '{client} est connecté au tenant {tenant}. Vous pouvez fermer cette fenêtre et revenir à votre terminal.',
  },
  de: {
    inputTitle: 'Gerät verbinden',
    inputPrompt: 'Geben Sie den Code ein, den Ihr Terminal anzeigt (kms login --device).',
    code: 'Code',
    continue: 'Weiter',
    notFound: 'Dieser Code ist nicht richtig. Prüfen Sie ihn und versuchen Sie es erneut.',
    expired: 'Dieser Code ist abgelaufen. Beginnen Sie im Terminal neu.',
    used: 'Dieser Code wurde bereits verwendet. Beginnen Sie im Terminal neu.',
    aborted: 'Die Anmeldung wurde abgebrochen: Das Gerät hat nichts erhalten.',
    failed: 'Die Anmeldung wurde nicht abgeschlossen: {detail}',
    tooMany:
      'Aus Ihrem Netzwerk wurden zu viele falsche Codes versucht. Warten Sie 15 Minuten und versuchen Sie es dann erneut.',
    confirmTitle: 'Anmeldung bestätigen',
    confirmAsk: '{client} möchte sich mit Ihrem Konto beim Mandanten {tenant} anmelden.',
    confirmCode: 'Fahren Sie nur fort, wenn Ihr Terminal diesen Code anzeigt:',
    confirmWarning:
      'Fahren Sie nur fort, wenn Sie diese Anmeldung selbst gestartet haben. Hat Ihnen jemand diesen Code oder Link geschickt, brechen Sie ab: Sonst erhielte diese Person Ihren Zugang zu diesem Mandanten.',
    confirmFrom: 'Angefragt von der Adresse {ip} um {time}.',
    confirmAgent:
      'Das Gerät beschreibt sich als {agent} (vom Gerät angegeben, nicht geprüft: Jeder kann beliebigen Text senden).',
    cancel: 'Abbrechen',
    successTitle: 'Gerät angemeldet',
    successText:
      '{client} ist beim Mandanten {tenant} angemeldet. Sie können dieses Fenster schließen und zum Terminal zurückkehren.',
  },
  it: {
    inputTitle: 'Collega un dispositivo',
    inputPrompt: 'Inserisci il codice mostrato dal tuo terminale (kms login --device).',
    code: 'Codice',
    continue: 'Continua',
    notFound: 'Questo codice non è corretto. Controllalo e riprova.',
    expired: 'Questo codice è scaduto. Ricomincia dal terminale.',
    used: 'Questo codice è già stato usato. Ricomincia dal terminale.',
    aborted: 'L’accesso è stato annullato: il dispositivo non ha ricevuto nulla.',
    failed: 'L’accesso non è stato completato: {detail}',
    tooMany: 'Dalla tua rete sono stati provati troppi codici errati. Attendi 15 minuti, poi riprova.',
    confirmTitle: 'Conferma l’accesso',
    confirmAsk: '{client} chiede di accedere con il tuo account al tenant {tenant}.',
    confirmCode: 'Continua solo se il tuo terminale mostra questo codice:',
    confirmWarning:
      'Continua solo se hai avviato tu questo accesso. Se qualcuno ti ha inviato questo codice o link, fermati: continuando gli daresti il tuo accesso a questo tenant.',
    confirmFrom: 'Richiesto dall’indirizzo {ip} alle {time}.',
    confirmAgent:
      'Il dispositivo si descrive come {agent} (dichiarato dal dispositivo, non verificato: chiunque può inviare qualsiasi testo).',
    cancel: 'Annulla',
    successTitle: 'Dispositivo collegato',
    successText:
      '{client} ha effettuato l’accesso al tenant {tenant}. Puoi chiudere questa finestra e tornare al terminale.',
  },
}

/** A token's `iat` as a UTC time a person reads (the page does not know their time zone). */
const utcTime = (iat: number | undefined): string =>
  typeof iat === 'number' ? `${new Date(iat * 1000).toISOString().slice(0, 19).replace('T', ' ')} UTC` : '?'

/** `{name}` placeholders, each value escaped and set in bold. */
const fillStrong = (template: string, values: Record<string, string>): string =>
  esc(template).replace(/\{(\w+)\}/g, (_, name: string) => `<strong>${esc(values[name] ?? '')}</strong>`)

export interface DeviceFlowDeps {
  sql: Sql
  clock: Clock
  tenants: Pick<TenantService, 'get'>
  memberships: MembershipRoles
  /** The tenant id of a resource indicator (urn:kms:tenant:<id>). */
  tenantOfResource(resource: string): string | undefined
}

/** What one request to the code page came to, for the throttle that wraps it. */
interface CodeAttempt {
  wrongCode: boolean
}

/**
 * The provider's device flow settings (its pages) and a middleware to run before its routes: the
 * throttle on code entry, and a code in the link (`verification_uri_complete`) shown filled in
 * on the form instead of the provider's script-submitted page.
 */
export function deviceFlow(deps: DeviceFlowDeps) {
  const attempts = new WeakMap<object, CodeAttempt>()
  const prefilled = new WeakMap<object, string>()

  const contextOf = (ctx: KoaContextWithOIDC): PageContext & { d: DeviceMessages } => {
    const page = pageContext(undefined, ctx.get('accept-language'))
    return { ...page, d: MESSAGES[page.locale] }
  }

  const send = (ctx: KoaContextWithOIDC, status: number, html: string) => {
    ctx.status = status
    ctx.type = 'html'
    ctx.set('cache-control', 'no-store')
    ctx.body = html
  }

  /** "Name (id)" of the tenants an authorization names; the name only to a member of the tenant. */
  async function tenantsNamed(resource: unknown, accountId: string | undefined): Promise<string> {
    const resources = (Array.isArray(resource) ? resource : [resource]).filter(
      (value): value is string => typeof value === 'string',
    )
    const labels: string[] = []
    for (const value of resources) {
      const tenantId = deps.tenantOfResource(value)
      if (!tenantId) continue
      const member = accountId !== undefined && (await deps.memberships.roleOf(tenantId, accountId))
      const tenant = member ? await deps.tenants.get(tenantId) : undefined
      labels.push(tenant ? `${tenant.name} (${tenantId})` : tenantId)
    }
    return labels.join(', ')
  }

  const inputForm = (ctx: KoaContextWithOIDC, page: ReturnType<typeof contextOf>, code: string) => {
    const secret = String((ctx.oidc.session?.state as { secret?: unknown } | undefined)?.secret ?? '')
    return `<form method="post" action="${esc(ctx.oidc.urlFor('code_verification'))}">
<input type="hidden" name="xsrf" value="${esc(secret)}">
<label for="user_code">${esc(page.d.code)}</label>
<input type="text" id="user_code" name="user_code" value="${esc(code)}" autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="64" required autofocus>
<button type="submit">${esc(page.d.continue)}</button>
</form>`
  }

  const feature: NonNullable<NonNullable<Configuration['features']>['deviceFlow']> = {
    enabled: true,
    charset: 'base-20',
    mask: '****-****',
    async userCodeInputSource(ctx, _providerForm, out, err) {
      const page = contextOf(ctx)
      const name = err?.name
      if (name === 'NotFoundError' || name === 'NoCodeError') {
        const attempt = attempts.get(ctx)
        if (attempt) attempt.wrongCode = true
      }
      const message =
        name === 'NotFoundError' || name === 'NoCodeError'
          ? page.d.notFound
          : name === 'ExpiredError'
            ? page.d.expired
            : name === 'AlreadyUsedError'
              ? page.d.used
              : name === 'AbortedError'
                ? page.d.aborted
                : out
                  ? page.d.failed.replace('{detail}', out.error_description ?? out.error)
                  : undefined
      const typed = (err as { userCode?: unknown } | undefined)?.userCode
      const code = typeof typed === 'string' ? typed : (prefilled.get(ctx) ?? '')
      const alert = message ? `<p class="error" role="alert">${esc(message)}</p>\n` : ''
      send(
        ctx,
        // Koa's status is still its 404 default on the plain GET; an error's is the error handler's.
        err && ctx.status >= 400 ? ctx.status : 200,
        renderPage(page, {
          title: page.d.inputTitle,
          body: `${alert}<p>${esc(page.d.inputPrompt)}</p>\n${inputForm(ctx, page, code)}`,
        }),
      )
    },
    async userCodeConfirmSource(ctx, _providerForm, client, deviceInfo, userCode) {
      const page = contextOf(ctx)
      const secret = String((ctx.oidc.session?.state as { secret?: unknown } | undefined)?.secret ?? '')
      const params = (ctx.oidc.entities.DeviceCode?.params ?? {}) as Record<string, unknown>
      const tenants = await tenantsNamed(params['resource'], ctx.oidc.session?.accountId)
      // The address is the one the device's request came from; the User-Agent is whatever text
      // it sent, so it is shown as such and never as a sign of who asks.
      const from = deviceInfo as { ip?: unknown; ua?: unknown }
      const requestedAt = ctx.oidc.entities.DeviceCode?.iat
      const body = `<p>${fillStrong(page.d.confirmAsk, { client: client.clientName ?? client.clientId, tenant: tenants })}</p>
<p>${esc(page.d.confirmCode)}</p>
<p class="secret" id="user-code">${esc(userCode)}</p>
<p class="error" role="alert" id="warning">${esc(page.d.confirmWarning)}</p>
<p id="requested-from">${fillStrong(page.d.confirmFrom, { ip: String(from.ip ?? '?'), time: utcTime(requestedAt) })}</p>
<p id="reported-agent">${fillStrong(page.d.confirmAgent, { agent: `“${String(from.ua ?? '?').slice(0, 200)}”` })}</p>
<form method="post" action="${esc(ctx.oidc.urlFor('code_verification'))}">
<input type="hidden" name="xsrf" value="${esc(secret)}">
<input type="hidden" name="user_code" value="${esc(userCode)}">
<button type="submit" name="confirm" value="yes">${esc(page.d.continue)}</button>
<button type="submit" name="abort" value="yes" class="secondary">${esc(page.d.cancel)}</button>
</form>`
      send(ctx, 200, renderPage(page, { title: page.d.confirmTitle, body }))
    },
    async successSource(ctx) {
      const page = contextOf(ctx)
      const client = ctx.oidc.client
      const params = (ctx.oidc.entities.DeviceCode?.params ?? {}) as Record<string, unknown>
      const tenants = await tenantsNamed(params['resource'], ctx.oidc.session?.accountId)
      const text = fillStrong(page.d.successText, {
        client: client?.clientName ?? client?.clientId ?? '',
        tenant: tenants,
      })
      send(ctx, 200, renderPage(page, { title: page.d.successTitle, body: `<p id="success">${text}</p>` }))
    },
  }

  /**
   * Before the provider's routes: every code typed is counted against the address before it is
   * looked up (a burst gets no more lookups than the limit); a code that matched nothing keeps
   * its count (the limit reached locks the address out), any other outcome gives its count back
   * without forgiving earlier wrong codes (a person could otherwise clear them with a code of
   * their own). A code in the page's link is shown in the form, for the person to submit.
   */
  async function middleware(ctx: KoaContextWithOIDC, next: () => Promise<unknown>, path: string) {
    if (ctx.path !== path) return next()
    if (ctx.method === 'GET') {
      const code = ctx.query['user_code']
      if (typeof code === 'string') {
        prefilled.set(ctx, code.slice(0, 64))
        ctx.querystring = ''
      }
      return next()
    }
    if (ctx.method !== 'POST') return next()
    const counter: ThrottleCounter = {
      subject: THROTTLE_SUBJECT,
      clientIp: normalizeIP(ctx.ip),
      limit: USER_CODE_THROTTLE.perAddressLimit,
    }
    const reservation = await reserveAttempt(deps.sql, {
      counters: [counter],
      now: deps.clock.now(),
      windowMs: USER_CODE_THROTTLE.windowMs,
    })
    if (!reservation.reserved) {
      const page = contextOf(ctx)
      ctx.set('retry-after', String(Math.ceil(reservation.retryAfterMs / 1000)))
      send(
        ctx,
        429,
        renderPage(page, {
          title: page.d.inputTitle,
          body: `<p class="error" role="alert">${esc(page.d.tooMany)}</p>`,
        }),
      )
      return undefined
    }
    const attempt: CodeAttempt = { wrongCode: false }
    attempts.set(ctx, attempt)
    try {
      return await next()
    } finally {
      if (attempt.wrongCode)
        await lockSpentCounters(deps.sql, {
          counters: [counter],
          now: deps.clock.now(),
          lockMs: USER_CODE_THROTTLE.lockMs,
        })
      else await releaseAttempt(deps.sql, counter.subject, counter.clientIp)
    }
  }

  return { feature, middleware }
}
