import type { Locale } from '../../../web/i18n.ts'
import { esc, type PageContext, renderPage } from '../../../web/layout.ts'

/*
 * The command line's confirmation page (`kms login` in a browser): shown at every authorization
 * code request of the CLI's client, also to a browser already signed in, so that no page can
 * send a signed-in browser to the provider and have a code delivered, unseen, to whatever
 * listens on a port of this computer (RFC 8252 8.6). It names who asks, for which tenant, and
 * where the sign-in goes, and says when to stop.
 */

const EN = {
  title: 'Let the kms command line sign in?',
  ask: '{client} asks to sign in with your account to the tenant {tenant}.',
  where: 'The sign-in goes to a program listening on this computer at port {port} ({address}).',
  warning:
    'Only continue if you just ran kms login on this computer. If you did not, or a web page or a message brought you here, cancel: continuing would give whatever listens on that port your access to this tenant.',
  continue: 'Continue',
  cancel: 'Cancel',
}
type CliMessages = typeof EN

const MESSAGES: Record<Locale, CliMessages> = {
  en: EN,
  es: {
    title: '¿Iniciar sesión en la línea de comandos kms?',
    ask: '{client} pide iniciar sesión con tu cuenta en el tenant {tenant}.',
    where:
      'El inicio de sesión va a un programa que escucha en este ordenador en el puerto {port} ({address}).',
    warning:
      'Continúa solo si acabas de ejecutar kms login en este ordenador. Si no, o si una página web o un mensaje te trajo aquí, cancela: continuar daría tu acceso a este tenant a lo que escuche en ese puerto.',
    continue: 'Continuar',
    cancel: 'Cancelar',
  },
  fr: {
    title: 'Connecter la ligne de commande kms ?',
    ask: '{client} demande à se connecter avec votre compte au tenant {tenant}.',
    where: 'La connexion est remise à un programme qui écoute sur cet ordinateur, port {port} ({address}).',
    warning:
      'Continuez seulement si vous venez de lancer kms login sur cet ordinateur. Sinon, ou si une page web ou un message vous a amené ici, annulez : continuer donnerait votre accès à ce tenant à ce qui écoute sur ce port.',
    continue: 'Continuer',
    cancel: 'Annuler',
  },
  de: {
    title: 'Die kms-Kommandozeile anmelden?',
    ask: '{client} möchte sich mit Ihrem Konto beim Mandanten {tenant} anmelden.',
    where: 'Die Anmeldung geht an ein Programm, das auf diesem Computer an Port {port} lauscht ({address}).',
    warning:
      'Fahren Sie nur fort, wenn Sie gerade auf diesem Computer kms login ausgeführt haben. Wenn nicht, oder wenn eine Webseite oder Nachricht Sie hierher gebracht hat, brechen Sie ab: Sonst erhielte, was an diesem Port lauscht, Ihren Zugang zu diesem Mandanten.',
    continue: 'Weiter',
    cancel: 'Abbrechen',
  },
  it: {
    title: 'Accedere con la riga di comando kms?',
    ask: '{client} chiede di accedere con il tuo account al tenant {tenant}.',
    where: 'L’accesso va a un programma in ascolto su questo computer alla porta {port} ({address}).',
    warning:
      'Continua solo se hai appena eseguito kms login su questo computer. Altrimenti, o se una pagina web o un messaggio ti ha portato qui, annulla: continuando daresti il tuo accesso a questo tenant a ciò che ascolta su quella porta.',
    continue: 'Continua',
    cancel: 'Annulla',
  },
}

/** `{name}` placeholders, each value escaped and set in bold with its id. */
const fillStrong = (template: string, values: Record<string, string>): string =>
  esc(template).replace(
    /\{(\w+)\}/g,
    (_, name: string) => `<strong id="cli-${esc(name)}">${esc(values[name] ?? '')}</strong>`,
  )

export function renderCliConfirmationPage(
  ctx: PageContext,
  page: {
    uid: string
    csrf: string
    clientName: string
    /** "Name (id)", or the id alone when the name is not to be shown. */
    tenant: string
    /** The loopback redirect the code would be sent to, and its port. */
    address: string
    port: string
  },
): string {
  const m = MESSAGES[ctx.locale]
  const body = `<p>${fillStrong(m.ask, { client: page.clientName, tenant: page.tenant })}</p>
<p>${fillStrong(m.where, { port: page.port, address: page.address })}</p>
<p class="error" role="alert" id="warning">${esc(m.warning)}</p>
<form method="post" action="/sign-in/${esc(page.uid)}/consent" id="cli-confirmation">
${page.csrf}
<button type="submit" name="decision" value="allow">${esc(m.continue)}</button>
<button type="submit" name="decision" value="deny" class="secondary">${esc(m.cancel)}</button>
</form>`
  return renderPage(ctx, { title: m.title, body })
}
