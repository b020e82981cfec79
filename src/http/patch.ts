/** PATCH semantics: the fields the patch gives replace the current ones; absent (undefined) fields stay. */
export function applyPatch<T extends object>(current: T, patch: Partial<T>): T {
  const merged = { ...current }
  for (const [field, value] of Object.entries(patch) as Array<[keyof T, T[keyof T] | undefined]>)
    if (value !== undefined) merged[field] = value
  return merged
}
