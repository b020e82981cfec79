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
  stepUp: 'You are signed in, but this application asks for one more verification.',
  appPanelText: 'Sign in to continue to {name}.',
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
  createAccount: 'Create an account',
  signUpPrompt: 'Enter your e-mail address. We will send a link to choose your password.',
  signUpSent: 'Check your e-mail: a link to finish is on its way. It works once.',
  signUpExists:
    'This address has an account already, so nothing new was created. Sign in with it, or choose “Forgot your password?” on the sign-in page.',
  tooManyRequests:
    'Too many e-mails were asked for from your network recently. Wait an hour, then try again.',
  emailInvalid: 'Enter an e-mail address.',
  blocked: 'This account is blocked. Contact the application’s administrator.',
  forgotPassword: 'Forgot your password?',
  forgotTitle: 'Reset your password',
  forgotPrompt:
    'Enter your e-mail address. If an account exists for it, we will send a link to choose a new password.',
  sendLink: 'Send link',
  forgotSent: 'If an account exists for this address, a link is on its way. It works once, for one hour.',
  resetTitle: 'Choose a new password',
  setupTitle: 'Set up your account',
  newPassword: 'New password (at least {min} characters)',
  repeatPassword: 'Repeat the password',
  savePassword: 'Save password',
  passwordsDiffer: 'The two passwords are not the same.',
  passwordWeak: 'The password needs {problems}.',
  linkInvalid: 'This link is not valid: it may have expired, been used, or been replaced by a newer one.',
  passwordSaved: 'Your password is saved. You can now sign in with it.',
  backToSignIn: 'Back to sign-in',
  resendCode: 'Send a new code',
  phoneNumber: 'Mobile number, with country code (+44…)',
  sendCode: 'Send code',
  smsEnrolTitle: 'Add your mobile number',
  smsEnrolPrompt: 'This application signs you in with a code sent by SMS. Enter the number to send it to.',
  emailCodeTitle: 'Check your e-mail',
  emailCodePrompt: 'We sent a 6-digit code to {destination}. Enter it here.',
  smsCodeTitle: 'Check your phone',
  smsCodePrompt: 'We sent a 6-digit code by SMS to {destination}. Enter it here.',
  phoneInvalid: 'Enter the number in international form, such as +14155550100.',
  tooManyCodes: 'Too many codes were sent. Wait a few minutes, then ask for a new one.',
  accessDeniedTitle: 'Access denied',
  accessDenied:
    'Access denied: your organisation’s access policy does not allow you to sign in to this application.',
  approvalTitle: 'Waiting for approval',
  approvalWaiting:
    'Signing in to this application needs an administrator’s approval. Your request has been sent. This page checks again by itself, and you will also get an e-mail when it is decided.',
  approvalRejected: 'Access denied: your request to sign in to this application was not approved.',
  approvalExpired:
    'Access denied: your request expired before anyone decided on it. Sign in again to ask once more.',
  checkAgain: 'Check again',
  returnToApp: 'Return to the application',
  signInWith: 'Sign in with {name}',
  federationFailed:
    'The sign-in through your organisation did not succeed. Try again, or use another way to sign in.',
  federationAccountExists:
    'An account with your e-mail address already exists here and is protected by its own password or verification. Sign in with your password instead.',
  partnerPending:
    'Your partner account is waiting for an operator’s approval. You can sign in once it is approved.',
  partnerRefused: 'This account may not use the partner portal.',
  signupTitle: 'Create your organisation',
  signupIntro:
    'Enter your organisation’s name and your e-mail address. We send a link to confirm the address; nothing is created before you open it.',
  organizationName: 'Organisation name',
  signupSubmit: 'Send the confirmation link',
  signupReferred: 'You were referred by a partner (code {code}).',
  signupReferralUnknown: 'The referral code {code} is not valid; you can still sign up without it.',
  signupSent: 'Check your inbox: a confirmation link is on its way to {email}. It works once, for 24 hours.',
  signupConfirmTitle: 'Confirm your sign-up',
  signupConfirmText: 'Create the organisation {organization} with {email} as its owner.',
  signupCreate: 'Create the organisation',
  signupDone:
    'The organisation {organization} is ready and you are its owner. Sign in to the console to continue.',
  signupInvalid:
    'This confirmation link is not valid: it expired or was used. Sign up again to get a new one.',
  signupNameTaken: 'An organisation with this name exists already. Choose another name.',
  signupTooMany: 'Too many sign-ups were asked for recently. Wait an hour, then try again.',
  partnerSignupTitle: 'Become a partner',
  partnerSignupIntro:
    'Enter your company’s name and your e-mail address. We send a link to confirm the address; then an operator reviews your application.',
  companyName: 'Company name',
  partnerConfirmText: 'Apply as {organization}, with {email} as your partner portal account.',
  partnerApply: 'Apply',
  partnerDone:
    'Thank you: the application of {organization} is received. You can sign in to the partner portal once an operator approves it.',
  formExpired: 'The form expired. Reload the page and try again.',
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
  stepUp: 'Ya has iniciado sesión, pero esta aplicación pide una verificación más.',
  appPanelText: 'Inicia sesión para continuar en {name}.',
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
  createAccount: 'Crear una cuenta',
  signUpPrompt: 'Escribe tu correo electrónico. Te enviaremos un enlace para elegir tu contraseña.',
  signUpSent: 'Revisa tu correo: el enlace para terminar está en camino. Funciona una vez.',
  signUpExists:
    'Esta dirección ya tiene una cuenta, así que no se creó nada nuevo. Inicia sesión con ella o elige «¿Olvidaste tu contraseña?» en la página de inicio de sesión.',
  tooManyRequests:
    'Se pidieron demasiados correos desde tu red recientemente. Espera una hora y vuelve a intentarlo.',
  emailInvalid: 'Escribe una dirección de correo electrónico.',
  blocked: 'Esta cuenta está bloqueada. Contacta con el administrador de la aplicación.',
  forgotPassword: '¿Olvidaste tu contraseña?',
  forgotTitle: 'Restablecer la contraseña',
  forgotPrompt:
    'Escribe tu correo electrónico. Si existe una cuenta, te enviaremos un enlace para elegir una contraseña nueva.',
  sendLink: 'Enviar enlace',
  forgotSent:
    'Si existe una cuenta con esta dirección, el enlace está en camino. Funciona una vez, durante una hora.',
  resetTitle: 'Elige una contraseña nueva',
  setupTitle: 'Configura tu cuenta',
  newPassword: 'Contraseña nueva (al menos {min} caracteres)',
  repeatPassword: 'Repite la contraseña',
  savePassword: 'Guardar contraseña',
  passwordsDiffer: 'Las dos contraseñas no coinciden.',
  passwordWeak: 'La contraseña necesita: {problems}.',
  linkInvalid:
    'Este enlace no es válido: puede haber caducado, haberse usado o haber sido sustituido por uno más reciente.',
  passwordSaved: 'Tu contraseña está guardada. Ya puedes iniciar sesión con ella.',
  backToSignIn: 'Volver a iniciar sesión',
  resendCode: 'Enviar un código nuevo',
  phoneNumber: 'Número de móvil, con prefijo internacional (+34…)',
  sendCode: 'Enviar código',
  smsEnrolTitle: 'Añade tu número de móvil',
  smsEnrolPrompt:
    'Esta aplicación te identifica con un código enviado por SMS. Escribe el número al que enviarlo.',
  emailCodeTitle: 'Revisa tu correo',
  emailCodePrompt: 'Hemos enviado un código de 6 cifras a {destination}. Escríbelo aquí.',
  smsCodeTitle: 'Revisa tu teléfono',
  smsCodePrompt: 'Hemos enviado un código de 6 cifras por SMS a {destination}. Escríbelo aquí.',
  phoneInvalid: 'Escribe el número en formato internacional, por ejemplo +34600000000.',
  tooManyCodes: 'Se han enviado demasiados códigos. Espera unos minutos y pide uno nuevo.',
  accessDeniedTitle: 'Acceso denegado',
  accessDenied:
    'Acceso denegado: la política de acceso de tu organización no te permite iniciar sesión en esta aplicación.',
  approvalTitle: 'Esperando aprobación',
  approvalWaiting:
    'Iniciar sesión en esta aplicación requiere la aprobación de un administrador. Tu solicitud se ha enviado. Esta página vuelve a comprobarlo sola y también recibirás un correo cuando se decida.',
  approvalRejected: 'Acceso denegado: tu solicitud para iniciar sesión en esta aplicación no se aprobó.',
  approvalExpired:
    'Acceso denegado: tu solicitud caducó antes de que nadie la decidiera. Inicia sesión de nuevo para volver a pedirlo.',
  checkAgain: 'Comprobar de nuevo',
  returnToApp: 'Volver a la aplicación',
  signInWith: 'Iniciar sesión con {name}',
  federationFailed:
    'El inicio de sesión a través de tu organización no se completó. Inténtalo de nuevo o usa otra forma de acceder.',
  federationAccountExists:
    'Aquí ya existe una cuenta con tu dirección de correo, protegida por su propia contraseña o verificación. Inicia sesión con tu contraseña.',
  partnerPending:
    'Tu cuenta de socio espera la aprobación de un operador. Podrás iniciar sesión cuando se apruebe.',
  partnerRefused: 'Esta cuenta no puede usar el portal de socios.',
  signupTitle: 'Crea tu organización',
  signupIntro:
    'Introduce el nombre de tu organización y tu dirección de correo. Enviamos un enlace para confirmar la dirección; no se crea nada antes de que lo abras.',
  organizationName: 'Nombre de la organización',
  signupSubmit: 'Enviar el enlace de confirmación',
  signupReferred: 'Te recomendó un socio (código {code}).',
  signupReferralUnknown: 'El código de recomendación {code} no es válido; puedes registrarte sin él.',
  signupSent:
    'Revisa tu bandeja de entrada: un enlace de confirmación va de camino a {email}. Funciona una vez, durante 24 horas.',
  signupConfirmTitle: 'Confirma tu registro',
  signupConfirmText: 'Crear la organización {organization} con {email} como propietario.',
  signupCreate: 'Crear la organización',
  signupDone:
    'La organización {organization} está lista y eres su propietario. Inicia sesión en la consola para continuar.',
  signupInvalid:
    'Este enlace de confirmación no es válido: caducó o ya se usó. Regístrate de nuevo para recibir otro.',
  signupNameTaken: 'Ya existe una organización con este nombre. Elige otro.',
  signupTooMany: 'Se pidieron demasiados registros recientemente. Espera una hora y vuelve a intentarlo.',
  partnerSignupTitle: 'Hazte socio',
  partnerSignupIntro:
    'Introduce el nombre de tu empresa y tu dirección de correo. Enviamos un enlace para confirmar la dirección; después un operador revisa tu solicitud.',
  companyName: 'Nombre de la empresa',
  partnerConfirmText: 'Solicitar como {organization}, con {email} como cuenta del portal de socios.',
  partnerApply: 'Solicitar',
  partnerDone:
    'Gracias: recibimos la solicitud de {organization}. Podrás iniciar sesión en el portal de socios cuando un operador la apruebe.',
  formExpired: 'El formulario caducó. Recarga la página y vuelve a intentarlo.',
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
  stepUp: 'Vous êtes connecté, mais cette application demande une vérification de plus.',
  appPanelText: 'Connectez-vous pour continuer vers {name}.',
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
  createAccount: 'Créer un compte',
  signUpPrompt: 'Saisissez votre adresse e-mail. Nous enverrons un lien pour choisir votre mot de passe.',
  signUpSent: 'Consultez vos e-mails : un lien pour terminer est en route. Il fonctionne une fois.',
  signUpExists:
    'Cette adresse a déjà un compte : rien de nouveau n’a été créé. Connectez-vous avec, ou choisissez « Mot de passe oublié ? » sur la page de connexion.',
  tooManyRequests:
    'Trop d’e-mails ont été demandés depuis votre réseau récemment. Attendez une heure, puis réessayez.',
  emailInvalid: 'Saisissez une adresse e-mail.',
  blocked: 'Ce compte est bloqué. Contactez l’administrateur de l’application.',
  forgotPassword: 'Mot de passe oublié ?',
  forgotTitle: 'Réinitialiser le mot de passe',
  forgotPrompt:
    'Saisissez votre adresse e-mail. Si un compte existe, nous enverrons un lien pour choisir un nouveau mot de passe.',
  sendLink: 'Envoyer le lien',
  forgotSent:
    'Si un compte existe pour cette adresse, un lien est en route. Il fonctionne une fois, pendant une heure.',
  resetTitle: 'Choisissez un nouveau mot de passe',
  setupTitle: 'Configurez votre compte',
  newPassword: 'Nouveau mot de passe (au moins {min} caractères)',
  repeatPassword: 'Répétez le mot de passe',
  savePassword: 'Enregistrer le mot de passe',
  passwordsDiffer: 'Les deux mots de passe ne sont pas identiques.',
  passwordWeak: 'Le mot de passe doit comporter : {problems}.',
  linkInvalid:
    'Ce lien n’est pas valide : il a peut-être expiré, déjà servi ou été remplacé par un plus récent.',
  passwordSaved: 'Votre mot de passe est enregistré. Vous pouvez maintenant vous connecter.',
  backToSignIn: 'Retour à la connexion',
  resendCode: 'Envoyer un nouveau code',
  phoneNumber: 'Numéro de mobile, avec l’indicatif du pays (+33…)',
  sendCode: 'Envoyer le code',
  smsEnrolTitle: 'Ajoutez votre numéro de mobile',
  smsEnrolPrompt:
    'Cette application vous connecte avec un code envoyé par SMS. Saisissez le numéro où l’envoyer.',
  emailCodeTitle: 'Consultez vos e-mails',
  emailCodePrompt: 'Nous avons envoyé un code à 6 chiffres à {destination}. Saisissez-le ici.',
  smsCodeTitle: 'Consultez votre téléphone',
  smsCodePrompt: 'Nous avons envoyé un code à 6 chiffres par SMS au {destination}. Saisissez-le ici.',
  phoneInvalid: 'Saisissez le numéro au format international, par exemple +33612345678.',
  tooManyCodes: 'Trop de codes ont été envoyés. Attendez quelques minutes, puis demandez-en un nouveau.',
  accessDeniedTitle: 'Accès refusé',
  accessDenied:
    'Accès refusé : la politique d’accès de votre organisation ne vous permet pas de vous connecter à cette application.',
  approvalTitle: 'En attente d’approbation',
  approvalWaiting:
    'La connexion à cette application nécessite l’approbation d’un administrateur. Votre demande a été envoyée. Cette page vérifie à nouveau d’elle-même, et vous recevrez aussi un e-mail lorsqu’elle sera décidée.',
  approvalRejected: 'Accès refusé : votre demande de connexion à cette application n’a pas été approuvée.',
  approvalExpired:
    'Accès refusé : votre demande a expiré avant qu’une décision soit prise. Connectez-vous à nouveau pour la renouveler.',
  checkAgain: 'Vérifier à nouveau',
  returnToApp: 'Retourner à l’application',
  signInWith: 'Se connecter avec {name}',
  federationFailed:
    'La connexion via votre organisation n’a pas abouti. Réessayez ou utilisez un autre moyen de connexion.',
  federationAccountExists:
    'Un compte avec votre adresse e-mail existe déjà ici, protégé par son propre mot de passe ou sa propre vérification. Connectez-vous avec votre mot de passe.',
  partnerPending:
    'Votre compte partenaire attend l’approbation d’un opérateur. Vous pourrez vous connecter une fois approuvé.',
  partnerRefused: 'Ce compte ne peut pas utiliser le portail partenaires.',
  signupTitle: 'Créez votre organisation',
  signupIntro:
    'Saisissez le nom de votre organisation et votre adresse e-mail. Nous envoyons un lien pour confirmer l’adresse ; rien n’est créé avant que vous l’ouvriez.',
  organizationName: 'Nom de l’organisation',
  signupSubmit: 'Envoyer le lien de confirmation',
  signupReferred: 'Vous avez été recommandé par un partenaire (code {code}).',
  signupReferralUnknown:
    'Le code de parrainage {code} n’est pas valide ; vous pouvez vous inscrire sans lui.',
  signupSent:
    'Consultez votre boîte de réception : un lien de confirmation est en route vers {email}. Il fonctionne une fois, pendant 24 heures.',
  signupConfirmTitle: 'Confirmez votre inscription',
  signupConfirmText: 'Créer l’organisation {organization} avec {email} comme propriétaire.',
  signupCreate: 'Créer l’organisation',
  signupDone:
    'L’organisation {organization} est prête et vous en êtes le propriétaire. Connectez-vous à la console pour continuer.',
  signupInvalid:
    'Ce lien de confirmation n’est pas valide : il a expiré ou a déjà servi. Inscrivez-vous à nouveau pour en recevoir un autre.',
  signupNameTaken: 'Une organisation porte déjà ce nom. Choisissez-en un autre.',
  signupTooMany: 'Trop d’inscriptions ont été demandées récemment. Attendez une heure, puis réessayez.',
  partnerSignupTitle: 'Devenez partenaire',
  partnerSignupIntro:
    'Saisissez le nom de votre entreprise et votre adresse e-mail. Nous envoyons un lien pour confirmer l’adresse ; ensuite un opérateur examine votre candidature.',
  companyName: 'Nom de l’entreprise',
  partnerConfirmText:
    'Postuler en tant que {organization}, avec {email} comme compte du portail partenaires.',
  partnerApply: 'Postuler',
  partnerDone:
    'Merci : la candidature de {organization} est reçue. Vous pourrez vous connecter au portail partenaires dès qu’un opérateur l’aura approuvée.',
  formExpired: 'Le formulaire a expiré. Rechargez la page et réessayez.',
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
  stepUp: 'Sie sind angemeldet, aber diese Anwendung verlangt eine weitere Bestätigung.',
  appPanelText: 'Melden Sie sich an, um mit {name} fortzufahren.',
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
  createAccount: 'Konto erstellen',
  signUpPrompt: 'Geben Sie Ihre E-Mail-Adresse ein. Wir senden einen Link, mit dem Sie Ihr Passwort wählen.',
  signUpSent: 'Prüfen Sie Ihre E-Mails: Ein Link zum Abschließen ist unterwegs. Er funktioniert einmal.',
  signUpExists:
    'Für diese Adresse gibt es bereits ein Konto, daher wurde nichts Neues angelegt. Melden Sie sich damit an oder wählen Sie auf der Anmeldeseite „Passwort vergessen?“.',
  tooManyRequests:
    'Aus Ihrem Netzwerk wurden zuletzt zu viele E-Mails angefordert. Warten Sie eine Stunde und versuchen Sie es dann erneut.',
  emailInvalid: 'Geben Sie eine E-Mail-Adresse ein.',
  blocked: 'Dieses Konto ist gesperrt. Wenden Sie sich an den Administrator der Anwendung.',
  forgotPassword: 'Passwort vergessen?',
  forgotTitle: 'Passwort zurücksetzen',
  forgotPrompt:
    'Geben Sie Ihre E-Mail-Adresse ein. Wenn ein Konto existiert, senden wir einen Link für ein neues Passwort.',
  sendLink: 'Link senden',
  forgotSent:
    'Wenn für diese Adresse ein Konto existiert, ist ein Link unterwegs. Er funktioniert einmal, eine Stunde lang.',
  resetTitle: 'Neues Passwort wählen',
  setupTitle: 'Konto einrichten',
  newPassword: 'Neues Passwort (mindestens {min} Zeichen)',
  repeatPassword: 'Passwort wiederholen',
  savePassword: 'Passwort speichern',
  passwordsDiffer: 'Die beiden Passwörter stimmen nicht überein.',
  passwordWeak: 'Das Passwort braucht: {problems}.',
  linkInvalid:
    'Dieser Link ist ungültig: Er ist abgelaufen, wurde schon benutzt oder durch einen neueren ersetzt.',
  passwordSaved: 'Ihr Passwort ist gespeichert. Sie können sich jetzt damit anmelden.',
  backToSignIn: 'Zurück zur Anmeldung',
  resendCode: 'Neuen Code senden',
  phoneNumber: 'Mobilnummer mit Ländervorwahl (+49…)',
  sendCode: 'Code senden',
  smsEnrolTitle: 'Mobilnummer hinzufügen',
  smsEnrolPrompt:
    'Diese Anwendung meldet Sie mit einem Code per SMS an. Geben Sie die Nummer ein, an die er gehen soll.',
  emailCodeTitle: 'Prüfen Sie Ihre E-Mails',
  emailCodePrompt: 'Wir haben einen 6-stelligen Code an {destination} gesendet. Geben Sie ihn hier ein.',
  smsCodeTitle: 'Prüfen Sie Ihr Telefon',
  smsCodePrompt:
    'Wir haben einen 6-stelligen Code per SMS an {destination} gesendet. Geben Sie ihn hier ein.',
  phoneInvalid: 'Geben Sie die Nummer im internationalen Format ein, etwa +4915112345678.',
  tooManyCodes:
    'Es wurden zu viele Codes gesendet. Warten Sie ein paar Minuten und fordern Sie dann einen neuen an.',
  accessDeniedTitle: 'Zugriff verweigert',
  accessDenied:
    'Zugriff verweigert: Die Zugriffsrichtlinie Ihrer Organisation erlaubt Ihnen die Anmeldung bei dieser Anwendung nicht.',
  approvalTitle: 'Warten auf Freigabe',
  approvalWaiting:
    'Die Anmeldung bei dieser Anwendung braucht die Freigabe eines Administrators. Ihre Anfrage wurde gesendet. Diese Seite prüft von selbst erneut, und Sie erhalten auch eine E-Mail, sobald entschieden ist.',
  approvalRejected:
    'Zugriff verweigert: Ihre Anfrage zur Anmeldung bei dieser Anwendung wurde nicht freigegeben.',
  approvalExpired:
    'Zugriff verweigert: Ihre Anfrage ist abgelaufen, bevor jemand entschieden hat. Melden Sie sich erneut an, um neu zu fragen.',
  checkAgain: 'Erneut prüfen',
  returnToApp: 'Zurück zur Anwendung',
  signInWith: 'Anmelden mit {name}',
  federationFailed:
    'Die Anmeldung über Ihre Organisation ist nicht gelungen. Versuchen Sie es erneut oder melden Sie sich anders an.',
  federationAccountExists:
    'Hier gibt es bereits ein Konto mit Ihrer E-Mail-Adresse, geschützt durch ein eigenes Passwort oder eine eigene Bestätigung. Melden Sie sich mit Ihrem Passwort an.',
  partnerPending:
    'Ihr Partnerkonto wartet auf die Freigabe durch einen Betreiber. Sie können sich anmelden, sobald es freigegeben ist.',
  partnerRefused: 'Dieses Konto darf das Partnerportal nicht nutzen.',
  signupTitle: 'Organisation anlegen',
  signupIntro:
    'Geben Sie den Namen Ihrer Organisation und Ihre E-Mail-Adresse ein. Wir senden einen Link, um die Adresse zu bestätigen; vorher wird nichts angelegt.',
  organizationName: 'Name der Organisation',
  signupSubmit: 'Bestätigungslink senden',
  signupReferred: 'Sie wurden von einem Partner empfohlen (Code {code}).',
  signupReferralUnknown:
    'Der Empfehlungscode {code} ist ungültig; Sie können sich auch ohne ihn registrieren.',
  signupSent:
    'Sehen Sie in Ihr Postfach: Ein Bestätigungslink ist unterwegs an {email}. Er gilt einmal, 24 Stunden lang.',
  signupConfirmTitle: 'Registrierung bestätigen',
  signupConfirmText: 'Die Organisation {organization} mit {email} als Eigentümer anlegen.',
  signupCreate: 'Organisation anlegen',
  signupDone:
    'Die Organisation {organization} ist bereit, und Sie sind ihr Eigentümer. Melden Sie sich an der Konsole an, um fortzufahren.',
  signupInvalid:
    'Dieser Bestätigungslink ist ungültig: Er ist abgelaufen oder wurde benutzt. Registrieren Sie sich erneut, um einen neuen zu erhalten.',
  signupNameTaken: 'Eine Organisation mit diesem Namen gibt es bereits. Wählen Sie einen anderen Namen.',
  signupTooMany:
    'In letzter Zeit wurden zu viele Registrierungen angefordert. Warten Sie eine Stunde und versuchen Sie es dann erneut.',
  partnerSignupTitle: 'Partner werden',
  partnerSignupIntro:
    'Geben Sie den Namen Ihres Unternehmens und Ihre E-Mail-Adresse ein. Wir senden einen Link, um die Adresse zu bestätigen; danach prüft ein Betreiber Ihre Bewerbung.',
  companyName: 'Name des Unternehmens',
  partnerConfirmText: 'Als {organization} bewerben, mit {email} als Konto für das Partnerportal.',
  partnerApply: 'Bewerben',
  partnerDone:
    'Danke: Die Bewerbung von {organization} ist eingegangen. Sie können sich am Partnerportal anmelden, sobald ein Betreiber sie freigibt.',
  formExpired: 'Das Formular ist abgelaufen. Laden Sie die Seite neu und versuchen Sie es erneut.',
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
  stepUp: 'Hai già effettuato l’accesso, ma questa applicazione chiede un’ulteriore verifica.',
  appPanelText: 'Accedi per continuare su {name}.',
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
  createAccount: 'Crea un account',
  signUpPrompt: 'Inserisci il tuo indirizzo e-mail. Ti invieremo un link per scegliere la password.',
  signUpSent: 'Controlla la tua e-mail: il link per completare è in arrivo. Funziona una volta.',
  signUpExists:
    'Questo indirizzo ha già un account, quindi non è stato creato nulla di nuovo. Accedi con esso o scegli «Password dimenticata?» nella pagina di accesso.',
  tooManyRequests:
    'Dalla tua rete sono state richieste troppe e-mail di recente. Attendi un’ora, poi riprova.',
  emailInvalid: 'Inserisci un indirizzo e-mail.',
  blocked: 'Questo account è bloccato. Contatta l’amministratore dell’applicazione.',
  forgotPassword: 'Password dimenticata?',
  forgotTitle: 'Reimposta la password',
  forgotPrompt:
    'Inserisci il tuo indirizzo e-mail. Se esiste un account, invieremo un link per scegliere una nuova password.',
  sendLink: 'Invia link',
  forgotSent:
    'Se esiste un account per questo indirizzo, il link è in arrivo. Funziona una volta, per un’ora.',
  resetTitle: 'Scegli una nuova password',
  setupTitle: 'Configura il tuo account',
  newPassword: 'Nuova password (almeno {min} caratteri)',
  repeatPassword: 'Ripeti la password',
  savePassword: 'Salva password',
  passwordsDiffer: 'Le due password non coincidono.',
  passwordWeak: 'La password richiede: {problems}.',
  linkInvalid:
    'Questo link non è valido: potrebbe essere scaduto, già usato o sostituito da uno più recente.',
  passwordSaved: 'La tua password è salvata. Ora puoi accedere.',
  backToSignIn: 'Torna all’accesso',
  resendCode: 'Invia un nuovo codice',
  phoneNumber: 'Numero di cellulare, con prefisso internazionale (+39…)',
  sendCode: 'Invia codice',
  smsEnrolTitle: 'Aggiungi il tuo numero di cellulare',
  smsEnrolPrompt:
    'Questa applicazione ti fa accedere con un codice inviato via SMS. Inserisci il numero a cui inviarlo.',
  emailCodeTitle: 'Controlla la tua e-mail',
  emailCodePrompt: 'Abbiamo inviato un codice di 6 cifre a {destination}. Inseriscilo qui.',
  smsCodeTitle: 'Controlla il telefono',
  smsCodePrompt: 'Abbiamo inviato un codice di 6 cifre via SMS a {destination}. Inseriscilo qui.',
  phoneInvalid: 'Inserisci il numero in formato internazionale, ad esempio +393471234567.',
  tooManyCodes: 'Sono stati inviati troppi codici. Attendi qualche minuto, poi chiedine uno nuovo.',
  accessDeniedTitle: 'Accesso negato',
  accessDenied:
    'Accesso negato: la politica di accesso della tua organizzazione non ti consente di accedere a questa applicazione.',
  approvalTitle: 'In attesa di approvazione',
  approvalWaiting:
    'L’accesso a questa applicazione richiede l’approvazione di un amministratore. La tua richiesta è stata inviata. Questa pagina ricontrolla da sola e riceverai anche un’e-mail quando sarà decisa.',
  approvalRejected:
    'Accesso negato: la tua richiesta di accesso a questa applicazione non è stata approvata.',
  approvalExpired:
    'Accesso negato: la tua richiesta è scaduta prima che qualcuno decidesse. Accedi di nuovo per chiederlo ancora.',
  checkAgain: 'Controlla di nuovo',
  returnToApp: 'Torna all’applicazione',
  signInWith: 'Accedi con {name}',
  federationFailed:
    'L’accesso tramite la tua organizzazione non è riuscito. Riprova o usa un altro modo per accedere.',
  federationAccountExists:
    'Qui esiste già un account con il tuo indirizzo e-mail, protetto da una propria password o verifica. Accedi con la tua password.',
  partnerPending:
    'Il tuo account partner attende l’approvazione di un operatore. Potrai accedere una volta approvato.',
  partnerRefused: 'Questo account non può usare il portale partner.',
  signupTitle: 'Crea la tua organizzazione',
  signupIntro:
    'Inserisci il nome della tua organizzazione e il tuo indirizzo e-mail. Inviamo un link per confermare l’indirizzo; nulla viene creato prima che tu lo apra.',
  organizationName: 'Nome dell’organizzazione',
  signupSubmit: 'Invia il link di conferma',
  signupReferred: 'Sei stato segnalato da un partner (codice {code}).',
  signupReferralUnknown: 'Il codice di segnalazione {code} non è valido; puoi registrarti anche senza.',
  signupSent:
    'Controlla la posta: un link di conferma sta arrivando a {email}. Funziona una volta, per 24 ore.',
  signupConfirmTitle: 'Conferma la registrazione',
  signupConfirmText: 'Creare l’organizzazione {organization} con {email} come proprietario.',
  signupCreate: 'Crea l’organizzazione',
  signupDone:
    'L’organizzazione {organization} è pronta e tu ne sei il proprietario. Accedi alla console per continuare.',
  signupInvalid:
    'Questo link di conferma non è valido: è scaduto o è già stato usato. Registrati di nuovo per riceverne un altro.',
  signupNameTaken: 'Esiste già un’organizzazione con questo nome. Scegline un altro.',
  signupTooMany: 'Sono state chieste troppe registrazioni di recente. Attendi un’ora, poi riprova.',
  partnerSignupTitle: 'Diventa partner',
  partnerSignupIntro:
    'Inserisci il nome della tua azienda e il tuo indirizzo e-mail. Inviamo un link per confermare l’indirizzo; poi un operatore esamina la tua candidatura.',
  companyName: 'Nome dell’azienda',
  partnerConfirmText: 'Candidarsi come {organization}, con {email} come account del portale partner.',
  partnerApply: 'Candidati',
  partnerDone:
    'Grazie: la candidatura di {organization} è stata ricevuta. Potrai accedere al portale partner quando un operatore la approverà.',
  formExpired: 'Il modulo è scaduto. Ricarica la pagina e riprova.',
}

const MESSAGES: Record<Locale, Messages> = { en: EN, es: ES, fr: FR, de: DE, it: IT }
export const messagesOf = (locale: Locale): Messages => MESSAGES[locale]
