/**
 * Duplicate detection (pure): the index finds exactly the pairs a brute-force comparison finds,
 * including near-identical tasks of a generated set whose instructions are mostly shared boilerplate
 * (the shingles hundreds of tasks share are not walked, but still counted toward each bound).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DuplicateIndex, findDuplicates, textSimilarity, type DuplicateCandidate } from '../src/check/duplicates.js';

const BOILERPLATE =
  'You are in a Debian container with the files under /app. Read the input described below, do exactly what it asks, ' +
  'and write the result where it says; keep every other file as it is and do not use the network.';

/** n tasks of a generated set: the same long boilerplate, each its own short ask. */
function generatedSet(n: number): DuplicateCandidate[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `t${i}`,
    environment: `env-${i}`,
    tests: `tests-${i}`,
    instruction: `${BOILERPLATE} Count the lines of /app/data-${i}.csv and write the count to /app/out-${i}.txt.`,
  }));
}

/** Every pair, compared the slow way. */
function bruteForce(tasks: DuplicateCandidate[], threshold = 0.9): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  for (let j = 0; j < tasks.length; j++)
    for (let i = 0; i < j; i++) {
      const a = tasks[i]!;
      const b = tasks[j]!;
      const firstSameContent = tasks.findIndex((t) => t.environment === b.environment && t.tests === b.tests);
      if (firstSameContent === i && i !== j) pairs.push([a.name, b.name]);
      else if (textSimilarity(a.instruction, b.instruction) >= threshold) pairs.push([a.name, b.name]);
    }
  return pairs.sort();
}

describe('duplicate tasks', () => {
  it('finds a near-identical pair hidden in boilerplate that 300 tasks share', () => {
    const tasks = generatedSet(300);
    // t300 asks what t17 asks, in other words only at the end: still a duplicate of t17 and nothing else.
    tasks.push({ ...tasks[17]!, name: 't300', environment: 'env-x', tests: 'tests-x' });
    const index = new DuplicateIndex();
    for (const t of tasks.slice(0, 300)) index.add(t);
    assert.deepEqual(
      index.matches(tasks[300]!).map((m) => m.name),
      ['t17'],
    );
    assert.deepEqual(
      findDuplicates(tasks).map((p) => [p.a, p.b]),
      [['t17', 't300']],
    );
  });

  it('pairs exactly what a brute-force comparison pairs (content, and instructions at the threshold)', () => {
    const words = ['sort', 'count', 'lines', 'words', 'file', 'csv', 'json', 'the', 'of', 'into', 'write', 'read'];
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const tasks: DuplicateCandidate[] = [];
    for (let i = 0; i < 160; i++) {
      const base = i > 10 && rand(3) === 0 ? tasks[rand(i)]!.instruction : '';
      const own = Array.from({ length: 6 + rand(20) }, () => words[rand(words.length)]).join(' ');
      // Some copy an earlier instruction and change a word or add a few (similarity near the threshold).
      const instruction = base ? `${base} ${rand(2) ? '' : words[rand(words.length)]!}`.trim() : own;
      const content = rand(10) === 0 && i > 0 ? tasks[rand(i)]! : null;
      tasks.push({
        name: `t${String(i).padStart(3, '0')}`,
        environment: content ? content.environment : `e${i}`,
        tests: content ? content.tests : `x${i}`,
        instruction,
      });
    }
    const expected = bruteForce(tasks);
    assert.ok(expected.length > 10, `the data has duplicates to find (${expected.length})`);
    assert.deepEqual(
      findDuplicates(tasks)
        .map((p): [string, string] => [p.a, p.b])
        .sort(),
      expected,
    );
    // With a small `frequent`, every instruction's common shingles are skipped and only counted: same answer.
    const index = new DuplicateIndex(0.9, 3);
    const viaIndex: Array<[string, string]> = [];
    for (const t of tasks) {
      for (const m of index.matches(t)) viaIndex.push([m.name, t.name]);
      index.add(t);
    }
    assert.deepEqual(viaIndex.sort(), expected);
  });

  it('says why: the same content, or the similarity', () => {
    const index = new DuplicateIndex();
    index.add({ name: 'a', environment: 'e', tests: 't', instruction: 'Fix the parser so the numbers add up.' });
    assert.deepEqual(
      index.matches({ name: 'b', environment: 'e', tests: 't', instruction: 'Other words entirely here.' }),
      [{ name: 'a', why: 'the same environment and the same tests' }],
    );
    assert.deepEqual(
      index.matches({
        name: 'c',
        environment: 'e2',
        tests: 't2',
        instruction: 'Fix the parser so the numbers add up.',
      }),
      [{ name: 'a', why: 'near-identical instructions (similarity 1.00)' }],
    );
    assert.deepEqual(
      index.matches({ name: 'd', environment: 'e3', tests: 't3', instruction: 'Sort a csv by date.' }),
      [],
    );
    assert.equal(index.size, 1);
  });
});
