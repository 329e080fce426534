/**
 * Duplicate tasks: the same environment and tests, or near-identical instructions (Jaccard
 * similarity of word 3-shingles at or above a threshold). Pure: no I/O.
 */

export interface DuplicateCandidate {
  name: string;
  environment: string;
  tests: string;
  instruction: string;
}

function shingles(text: string, k = 3): Set<string> {
  const words = text.toLowerCase().match(/[a-z0-9_./-]+/g) ?? [];
  const out = new Set<string>();
  for (let i = 0; i + k <= words.length; i++) out.add(words.slice(i, i + k).join(' '));
  if (words.length < k && words.length) out.add(words.join(' '));
  return out;
}

function jaccard(a: Set<string>, b: Set<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let inter = 0;
  for (const s of a) if (b.has(s)) inter += 1;
  return inter / (a.size + b.size - inter);
}

/** Jaccard similarity of word 3-shingles: 1 for the same text, near 0 for unrelated ones. */
export function textSimilarity(a: string, b: string): number {
  return jaccard(shingles(a), shingles(b));
}

/**
 * The tasks seen so far, indexed so that one more is compared only with those that can be its
 * duplicate: the same content by a hash map, instructions through an inverted index of shingles.
 * Similarity t needs at least t * max(|A|, |B|) shingles in common (the union is at least the
 * larger set), so a task sharing fewer is never compared. Shingles that `frequent` or more tasks
 * share (a generated set's boilerplate) are not walked, but still counted in that bound: an
 * instruction made mostly of them is compared with every task, so no near-duplicate is missed.
 * Adding and matching cost about the postings of the task's rarer shingles, not the whole set.
 */
export class DuplicateIndex {
  private readonly tasks: Array<{ task: DuplicateCandidate; shingles: Set<string> }> = [];
  private readonly byContent = new Map<string, number>();
  private readonly postings = new Map<string, number[]>();

  constructor(
    private readonly threshold = 0.9,
    private readonly frequent = 200,
  ) {}

  get size(): number {
    return this.tasks.length;
  }

  add(task: DuplicateCandidate): void {
    const i = this.tasks.length;
    const set = shingles(task.instruction);
    this.tasks.push({ task, shingles: set });
    const key = contentKey(task);
    if (!this.byContent.has(key)) this.byContent.set(key, i);
    for (const sh of set) {
      const list = this.postings.get(sh);
      if (list) list.push(i);
      else this.postings.set(sh, [i]);
    }
  }

  /** The tasks already added that `task` duplicates, in the order they were added, with why. */
  matches(task: DuplicateCandidate): Array<{ name: string; why: string }> {
    const found = new Map<number, string>();
    const same = this.byContent.get(contentKey(task));
    if (same !== undefined) found.set(same, 'the same environment and the same tests');
    const set = shingles(task.instruction);
    let frequentShared = 0;
    const shared = new Map<number, number>();
    for (const sh of set) {
      const list = this.postings.get(sh);
      if (!list) continue;
      if (list.length >= this.frequent) frequentShared += 1;
      else for (const i of list) shared.set(i, (shared.get(i) ?? 0) + 1);
    }
    const reachable = (i: number, common: number): boolean =>
      common + frequentShared >= this.threshold * Math.max(set.size, this.tasks[i]!.shingles.size);
    // A task sharing no rarer shingle has at most the frequent ones in common.
    const all = frequentShared >= this.threshold * set.size;
    const candidates = all ? this.tasks.keys() : shared.keys();
    for (const i of candidates) {
      if (found.has(i) || !reachable(i, shared.get(i) ?? 0)) continue;
      const sim = jaccard(set, this.tasks[i]!.shingles);
      if (sim >= this.threshold) found.set(i, `near-identical instructions (similarity ${sim.toFixed(2)})`);
    }
    return [...found].sort(([a], [b]) => a - b).map(([i, why]) => ({ name: this.tasks[i]!.task.name, why }));
  }
}

const contentKey = (t: DuplicateCandidate): string => `${t.environment}\u0000${t.tests}`;

/** Every pair (a added before b) of tasks that are the same task, sorted by name. */
export function findDuplicates(
  tasks: DuplicateCandidate[],
  threshold = 0.9,
): Array<{ a: string; b: string; why: string }> {
  const index = new DuplicateIndex(threshold);
  const pairs: Array<{ a: string; b: string; why: string }> = [];
  for (const t of tasks) {
    for (const m of index.matches(t)) pairs.push({ a: m.name, b: t.name, why: m.why });
    index.add(t);
  }
  return pairs.sort((x, y) => (x.a === y.a ? (x.b < y.b ? -1 : 1) : x.a < y.a ? -1 : 1));
}
