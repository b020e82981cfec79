import { type Static, Type } from 'typebox'
import { nameSchema, Text } from '../http/http-schemas.ts'
import { invalidField } from '../platform/errors.ts'
import { LOCALES, type Locale } from '../web/i18n.ts'

/** Spec 2.6 and 8: per locale, a title of at most 500 characters and a text of at most 1000. */
const PANEL_LIMITS = { titleChars: 500, textChars: 1000, imageUrlChars: 2048 } as const

const Translation = Type.Object(
  {
    title: Text(PANEL_LIMITS.titleChars, 'The panel’s heading', 1),
    text: Text(PANEL_LIMITS.textChars, 'The panel’s text'),
  },
  { additionalProperties: false },
)

export const LoginPanelSchema = Type.Object(
  {
    imageUrl: Type.Optional(
      Type.String({
        minLength: 9,
        maxLength: PANEL_LIMITS.imageUrlChars,
        description: 'An https image shown in the panel (the pages’ CSP allows https images)',
      }),
    ),
    translations: Type.Optional(
      Type.Object(
        Object.fromEntries(LOCALES.map((locale) => [locale, Type.Optional(Translation)])) as Record<
          Locale,
          ReturnType<typeof Type.Optional<typeof Translation>>
        >,
        { additionalProperties: false, description: 'Title and text per locale: en, es, fr, de, it' },
      ),
    ),
  },
  { additionalProperties: false },
)
nameSchema(LoginPanelSchema, 'LoginPanel')
export type LoginPanel = Static<typeof LoginPanelSchema>

/** The same as a request body of its own, with an example. */
export const LoginPanelBody = Type.Object(LoginPanelSchema.properties, {
  additionalProperties: false,
  examples: [
    {
      imageUrl: 'https://cdn.example.com/panel.png',
      translations: {
        en: { title: 'Welcome to Orders', text: 'Sign in to see your orders.' },
        de: { title: 'Willkommen bei Orders', text: 'Melden Sie sich an, um Ihre Bestellungen zu sehen.' },
      },
    },
  ],
})
nameSchema(LoginPanelBody, 'UpdateLoginPanel')

/** The image must be an absolute https URL: anything else would not load under the pages' CSP. */
export function checkLoginPanel(panel: LoginPanel, field: string): LoginPanel {
  if (panel.imageUrl !== undefined) {
    let url: URL | undefined
    try {
      url = new URL(panel.imageUrl)
    } catch {
      url = undefined
    }
    if (url?.protocol !== 'https:') throw invalidField(`${field}/imageUrl`, 'must be an absolute https URL')
  }
  return panel
}

/** What a sign-in page shows in its panel. */
export interface PanelContent {
  title: string
  text: string
  imageUrl?: string | undefined
}

/**
 * Spec 2.6: the application's panel for the locale, then the tenant's, then the service's defaults;
 * the image likewise, independently of the words.
 */
export function resolvePanel(
  locale: Locale,
  defaults: { title: string; text: string },
  application: LoginPanel | undefined,
  tenant: LoginPanel | undefined,
): PanelContent {
  const words = application?.translations?.[locale] ?? tenant?.translations?.[locale] ?? defaults
  const imageUrl = application?.imageUrl ?? tenant?.imageUrl
  return { title: words.title, text: words.text, ...(imageUrl ? { imageUrl } : {}) }
}
