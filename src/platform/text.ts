/**
 * Cutting tenant text (key names, a model's reasons) to a bound before it is stored (issue 31,
 * defect 5). A JavaScript string is UTF-16: `slice(0, n)` counts code units and may keep the
 * first half of a surrogate pair (an emoji), which JSON.stringify writes as a lone `\ud83d`
 * escape that PostgreSQL's json parser refuses ("invalid input syntax for type json"); the whole
 * batch insert then failed. The bound is in code points, which is what PostgreSQL's length()
 * and the columns' CHECKs count, and the cut falls between grapheme clusters, so a flag or a
 * ZWJ sequence is kept whole or left out whole.
 */

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' })

/** Code points of a string (a surrogate pair is one). */
export function codePointLength(text: string): number {
  let n = 0
  for (const _ of text) n++
  return n
}

/**
 * `text` made well-formed (a lone surrogate becomes U+FFFD) and, when longer than `max` code
 * points, cut on a grapheme boundary to at most `max - 1` code points followed by `…`.
 */
export function cutText(text: string, max: number): string {
  const whole = text.toWellFormed()
  if (whole.length <= max || codePointLength(whole) <= max) return whole
  let kept = ''
  let length = 0
  for (const { segment } of graphemes.segment(whole)) {
    const size = codePointLength(segment)
    if (length + size > max - 1) break
    kept += segment
    length += size
  }
  return `${kept}…`
}

/**
 * `text` made well-formed and cut to at most `max` UTF-16 units without splitting a surrogate
 * pair: a bound for values that go into JSON (audit details) or a length-checked column, where a
 * plain `slice` could keep half an emoji.
 */
export function clipText(text: string, max: number): string {
  const whole = text.toWellFormed()
  if (whole.length <= max) return whole
  const cut = whole.slice(0, max)
  // A high surrogate at the end lost its partner: drop it.
  return /[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut
}
