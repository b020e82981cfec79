/** The locales of the sign-in pages (spec 2.6): English first, the fallback. */
export const LOCALES = ['en', 'es', 'fr', 'de', 'it'] as const
export type Locale = (typeof LOCALES)[number]

const isLocale = (value: string): value is Locale => (LOCALES as readonly string[]).includes(value)

/**
 * The request's locale: the first supported one of `ui_locales` (space-separated, OpenID), then
 * of Accept-Language (by q-value), else English.
 */
export function pickLocale(uiLocales: string | undefined, acceptLanguage: string | undefined): Locale {
  for (const tag of (uiLocales ?? '').slice(0, 200).split(/\s+/)) {
    const base = tag.toLowerCase().split('-')[0] ?? ''
    if (isLocale(base)) return base
  }
  const ranked = (acceptLanguage ?? '')
    .slice(0, 500)
    .split(',')
    .map((part, index) => {
      const [tag = '', ...params] = part.trim().split(';')
      const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)?.[1]).find(Boolean)
      return { base: tag.toLowerCase().split('-')[0] ?? '', q: q === undefined ? 1 : Number(q), index }
    })
    .filter((entry) => entry.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index)
  for (const { base } of ranked) if (isLocale(base)) return base
  return 'en'
}

const EN = {
  panelTitle: 'Keys and identity for your whole team',
  panelText: 'Post-quantum and classical keys, envelope encryption and sign-in, in one place.',
  signInTitle: 'Sign in',
  email: 'E-mail address',
  password: 'Password',
  signIn: 'Sign in',
  invalidCredentials: 'The e-mail address or password is not right.',
  locked: 'Too many attempts. Try again in a few minutes.',
  totpTitle: 'Two-step verification',
  totpPrompt: 'Enter the 6-digit code from your authenticator app.',
  code: 'Code',
  verify: 'Verify',
  invalidCode: 'That code is not right or was already used.',
  enrolTitle: 'Set up two-step verification',
  enrolPrompt:
    'This tenant requires an authenticator app. Add this key to your app, then enter the code it shows.',
  secretKey: 'Key',
  openInApp: 'Open in authenticator app',
  consentTitle: 'Allow access?',
  consentPrompt: 'wants to use your account:',
  allow: 'Allow',
  deny: 'Deny',
  signOutTitle: 'Sign out?',
  signOutPrompt: 'Do you want to sign out?',
  signOut: 'Yes, sign me out',
  stay: 'No, stay signed in',
  signedOutTitle: 'You are signed out',
  signedOutText: 'You can close this window.',
  errorTitle: 'Something went wrong',
  notMember: 'Your account is not a member of this tenant.',
  continue: 'Continue',
  continuing: 'Signing you in…',
  inviteTitle: 'Join the team',
  inviteText: 'You are invited to join {tenant} as {role}.',
  choosePassword: 'Choose a password (at least {min} characters)',
  yourPassword: 'Your password',
  accept: 'Accept invitation',
  inviteInvalid: 'This invitation link is not valid: it may have expired, been used or been revoked.',
  inviteDone: 'You are now a member of {tenant}. You can sign in to the console.',
  back: 'Start again',
}
export type Messages = typeof EN

const ES: Messages = {
  panelTitle: 'Claves e identidad para todo tu equipo',
  panelText: 'Claves poscuánticas y clásicas, cifrado de sobre e inicio de sesión, en un solo lugar.',
  signInTitle: 'Iniciar sesión',
  email: 'Correo electrónico',
  password: 'Contraseña',
  signIn: 'Iniciar sesión',
  invalidCredentials: 'El correo electrónico o la contraseña no son correctos.',
  locked: 'Demasiados intentos. Vuelve a intentarlo en unos minutos.',
  totpTitle: 'Verificación en dos pasos',
  totpPrompt: 'Introduce el código de 6 dígitos de tu aplicación de autenticación.',
  code: 'Código',
  verify: 'Verificar',
  invalidCode: 'El código no es correcto o ya se usó.',
  enrolTitle: 'Configura la verificación en dos pasos',
  enrolPrompt:
    'Este inquilino exige una aplicación de autenticación. Añade esta clave a tu aplicación e introduce el código que muestra.',
  secretKey: 'Clave',
  openInApp: 'Abrir en la aplicación de autenticación',
  consentTitle: '¿Permitir el acceso?',
  consentPrompt: 'quiere usar tu cuenta:',
  allow: 'Permitir',
  deny: 'Denegar',
  signOutTitle: '¿Cerrar sesión?',
  signOutPrompt: '¿Quieres cerrar la sesión?',
  signOut: 'Sí, cerrar sesión',
  stay: 'No, seguir conectado',
  signedOutTitle: 'Has cerrado la sesión',
  signedOutText: 'Puedes cerrar esta ventana.',
  errorTitle: 'Algo salió mal',
  notMember: 'Tu cuenta no es miembro de este inquilino.',
  continue: 'Continuar',
  continuing: 'Iniciando sesión…',
  inviteTitle: 'Únete al equipo',
  inviteText: 'Te invitan a unirte a {tenant} como {role}.',
  choosePassword: 'Elige una contraseña (al menos {min} caracteres)',
  yourPassword: 'Tu contraseña',
  accept: 'Aceptar la invitación',
  inviteInvalid: 'Este enlace de invitación no es válido: puede haber caducado, haberse usado o revocado.',
  inviteDone: 'Ya eres miembro de {tenant}. Puedes iniciar sesión en la consola.',
  back: 'Empezar de nuevo',
}
const FR: Messages = {
  panelTitle: 'Clés et identité pour toute votre équipe',
  panelText: 'Clés post-quantiques et classiques, chiffrement d’enveloppe et connexion, au même endroit.',
  signInTitle: 'Connexion',
  email: 'Adresse e-mail',
  password: 'Mot de passe',
  signIn: 'Se connecter',
  invalidCredentials: 'L’adresse e-mail ou le mot de passe est incorrect.',
  locked: 'Trop de tentatives. Réessayez dans quelques minutes.',
  totpTitle: 'Validation en deux étapes',
  totpPrompt: 'Saisissez le code à 6 chiffres de votre application d’authentification.',
  code: 'Code',
  verify: 'Valider',
  invalidCode: 'Ce code est incorrect ou a déjà servi.',
  enrolTitle: 'Configurer la validation en deux étapes',
  enrolPrompt:
    'Ce locataire exige une application d’authentification. Ajoutez cette clé à votre application, puis saisissez le code affiché.',
  secretKey: 'Clé',
  openInApp: 'Ouvrir dans l’application d’authentification',
  consentTitle: 'Autoriser l’accès ?',
  consentPrompt: 'souhaite utiliser votre compte :',
  allow: 'Autoriser',
  deny: 'Refuser',
  signOutTitle: 'Se déconnecter ?',
  signOutPrompt: 'Voulez-vous vous déconnecter ?',
  signOut: 'Oui, me déconnecter',
  stay: 'Non, rester connecté',
  signedOutTitle: 'Vous êtes déconnecté',
  signedOutText: 'Vous pouvez fermer cette fenêtre.',
  errorTitle: 'Une erreur s’est produite',
  notMember: 'Votre compte n’est pas membre de ce locataire.',
  continue: 'Continuer',
  continuing: 'Connexion en cours…',
  inviteTitle: 'Rejoindre l’équipe',
  inviteText: 'Vous êtes invité à rejoindre {tenant} en tant que {role}.',
  choosePassword: 'Choisissez un mot de passe (au moins {min} caractères)',
  yourPassword: 'Votre mot de passe',
  accept: 'Accepter l’invitation',
  inviteInvalid: 'Ce lien d’invitation n’est pas valide : il a peut-être expiré, servi ou été révoqué.',
  inviteDone: 'Vous êtes maintenant membre de {tenant}. Vous pouvez vous connecter à la console.',
  back: 'Recommencer',
}
const DE: Messages = {
  panelTitle: 'Schlüssel und Identität für Ihr ganzes Team',
  panelText: 'Post-Quanten- und klassische Schlüssel, Umschlagverschlüsselung und Anmeldung an einem Ort.',
  signInTitle: 'Anmelden',
  email: 'E-Mail-Adresse',
  password: 'Passwort',
  signIn: 'Anmelden',
  invalidCredentials: 'E-Mail-Adresse oder Passwort ist nicht richtig.',
  locked: 'Zu viele Versuche. Versuchen Sie es in einigen Minuten erneut.',
  totpTitle: 'Bestätigung in zwei Schritten',
  totpPrompt: 'Geben Sie den 6-stelligen Code aus Ihrer Authenticator-App ein.',
  code: 'Code',
  verify: 'Bestätigen',
  invalidCode: 'Der Code ist nicht richtig oder wurde schon verwendet.',
  enrolTitle: 'Bestätigung in zwei Schritten einrichten',
  enrolPrompt:
    'Dieser Mandant verlangt eine Authenticator-App. Fügen Sie diesen Schlüssel Ihrer App hinzu und geben Sie den angezeigten Code ein.',
  secretKey: 'Schlüssel',
  openInApp: 'In der Authenticator-App öffnen',
  consentTitle: 'Zugriff erlauben?',
  consentPrompt: 'möchte Ihr Konto verwenden:',
  allow: 'Erlauben',
  deny: 'Ablehnen',
  signOutTitle: 'Abmelden?',
  signOutPrompt: 'Möchten Sie sich abmelden?',
  signOut: 'Ja, abmelden',
  stay: 'Nein, angemeldet bleiben',
  signedOutTitle: 'Sie sind abgemeldet',
  signedOutText: 'Sie können dieses Fenster schließen.',
  errorTitle: 'Etwas ist schiefgegangen',
  notMember: 'Ihr Konto ist kein Mitglied dieses Mandanten.',
  continue: 'Weiter',
  continuing: 'Anmeldung läuft…',
  inviteTitle: 'Dem Team beitreten',
  inviteText: 'Sie sind eingeladen, {tenant} als {role} beizutreten.',
  choosePassword: 'Wählen Sie ein Passwort (mindestens {min} Zeichen)',
  yourPassword: 'Ihr Passwort',
  accept: 'Einladung annehmen',
  inviteInvalid: 'Dieser Einladungslink ist nicht gültig: Er ist abgelaufen, wurde benutzt oder widerrufen.',
  inviteDone: 'Sie sind jetzt Mitglied von {tenant}. Sie können sich in der Konsole anmelden.',
  back: 'Neu beginnen',
}
const IT: Messages = {
  panelTitle: 'Chiavi e identità per tutto il tuo team',
  panelText: 'Chiavi post-quantistiche e classiche, cifratura a busta e accesso, in un unico posto.',
  signInTitle: 'Accedi',
  email: 'Indirizzo e-mail',
  password: 'Password',
  signIn: 'Accedi',
  invalidCredentials: 'L’indirizzo e-mail o la password non sono corretti.',
  locked: 'Troppi tentativi. Riprova tra qualche minuto.',
  totpTitle: 'Verifica in due passaggi',
  totpPrompt: 'Inserisci il codice a 6 cifre della tua app di autenticazione.',
  code: 'Codice',
  verify: 'Verifica',
  invalidCode: 'Il codice non è corretto o è già stato usato.',
  enrolTitle: 'Configura la verifica in due passaggi',
  enrolPrompt:
    'Questo tenant richiede un’app di autenticazione. Aggiungi questa chiave alla tua app, poi inserisci il codice mostrato.',
  secretKey: 'Chiave',
  openInApp: 'Apri nell’app di autenticazione',
  consentTitle: 'Consentire l’accesso?',
  consentPrompt: 'vuole usare il tuo account:',
  allow: 'Consenti',
  deny: 'Nega',
  signOutTitle: 'Uscire?',
  signOutPrompt: 'Vuoi uscire?',
  signOut: 'Sì, esci',
  stay: 'No, resta connesso',
  signedOutTitle: 'Sei uscito',
  signedOutText: 'Puoi chiudere questa finestra.',
  errorTitle: 'Qualcosa è andato storto',
  notMember: 'Il tuo account non è membro di questo tenant.',
  continue: 'Continua',
  continuing: 'Accesso in corso…',
  inviteTitle: 'Unisciti al team',
  inviteText: 'Sei invitato a unirti a {tenant} come {role}.',
  choosePassword: 'Scegli una password (almeno {min} caratteri)',
  yourPassword: 'La tua password',
  accept: 'Accetta l’invito',
  inviteInvalid: 'Questo link di invito non è valido: potrebbe essere scaduto, già usato o revocato.',
  inviteDone: 'Ora sei membro di {tenant}. Puoi accedere alla console.',
  back: 'Ricomincia',
}

const MESSAGES: Record<Locale, Messages> = { en: EN, es: ES, fr: FR, de: DE, it: IT }
export const messagesOf = (locale: Locale): Messages => MESSAGES[locale]
