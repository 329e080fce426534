/**
 * The group book's memory stays bounded: a complete group is answered for an hour after its last
 * grade, one that never completes for a day, then both are forgotten (404), with their members.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GroupBook } from '../src/serve/groups.js';
import type { GradeEvent } from '../src/serve/sessions.js';

const HOUR = 3600_000;

function graded(id: string, reward: number): GradeEvent {
  return {
    kind: 'session',
    id,
    task: 't',
    policy: null,
    servedBy: 'named',
    group: 'g',
    grade: {
      reward,
      status: 'graded',
      error_class: null,
      metrics: { acc: reward, pass_rate: reward, tests_passed: reward, tests_total: 1 },
      tests: [],
      protection: 'rules',
      admission: null,
    },
  };
}

describe('GroupBook', () => {
  it('forgets a complete group an hour after its last grade, a pending one after a day', () => {
    let now = 0;
    const counted: boolean[][] = [];
    const book = new GroupBook(
      (g) => counted.push(g.outcomes),
      () => now,
    );
    const add = (id: string, members: string[]) =>
      book.add({ id, kind: 'sessions', task: 't', servedBy: 'named', policy: null, sessions: members });
    add('done', ['a', 'b']);
    add('pending', ['c', 'd']);
    book.graded(graded('a', 1));
    now = 10 * 60_000;
    book.graded(graded('b', 1));
    assert.deepEqual(counted, [[true, true]]);
    assert.deepEqual(book.view('done').rewards, [1, 1]);

    now += HOUR - 1000; // within the hour after its last grade: still answered
    add('other-1', ['e']);
    assert.equal(book.view('done').done, true);
    now += 2 * 60_000; // past it
    add('other-2', ['f']);
    assert.throws(() => book.view('done'), /no group/);
    assert.equal(book.view('pending').done, false, 'a pending group is kept longer');
    // A late grade of a forgotten group's member is ignored (its member map is gone too).
    book.graded(graded('a', 0));
    assert.equal(counted.length, 1);

    now = 24 * HOUR + 1000;
    add('other-3', ['g']);
    assert.throws(() => book.view('pending'), /no group/);
    assert.equal(book.size(), 3, 'the three groups added within the day are kept');
  });
});
