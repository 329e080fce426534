/** Levenshtein distance: the fewest one-character insertions, deletions and substitutions from a to b. */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * The valid name a typo most likely meant: the closest one (case ignored) when it is close enough
 * to be a typo (at most 2 edits, or a third of the word's length), else null. Ties go to the
 * earlier candidate, so the order of `valid` decides between equally close names.
 */
export function nearestName(word: string, valid: readonly string[]): string | null {
  let best: { name: string; d: number } | null = null;
  for (const name of valid) {
    const d = editDistance(word.toLowerCase(), name.toLowerCase());
    if (!best || d < best.d) best = { name, d };
  }
  return best && best.d <= Math.max(2, Math.floor(word.length / 3)) ? best.name : null;
}
