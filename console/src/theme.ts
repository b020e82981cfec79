/** Light, dark, or the system's; kept in localStorage (a preference, not a secret). */
export type Theme = 'light' | 'dark' | 'system'
const KEY = 'kms-console.theme'

export function storedTheme(): Theme {
  const value = localStorage.getItem(KEY)
  return value === 'light' || value === 'dark' ? value : 'system'
}

/** Sets `data-theme` on the document; "system" follows prefers-color-scheme in the CSS. */
export function applyTheme(theme: Theme): void {
  if (theme === 'system') {
    delete document.documentElement.dataset['theme']
    localStorage.removeItem(KEY)
  } else {
    document.documentElement.dataset['theme'] = theme
    localStorage.setItem(KEY, theme)
  }
}
