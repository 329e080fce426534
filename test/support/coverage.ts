import { it, type TestContext } from 'node:test';

/**
 * How much of a shared behaviour suite one registration runs. Every behaviour runs in full on each
 * implementation whose code differs (the Docker backend's helper shell and engine exec read
 * commands and snapshots by different code, so the sandbox contract and the grading bounds run in
 * full on both). Where the code under test is shared, a registration runs the smoke subset: the
 * cases that show the wiring (an engine pool routes to the same Docker backend per engine; the
 * grading attacks meet the engine-exec path only through exec and the change scan).
 */
export type Coverage = 'full' | 'smoke';

type Body = (t: TestContext) => void | Promise<void>;

export interface Cases {
  /** A case only full coverage runs. */
  full(name: string, body: Body): void;
  /** A case every registration runs: it shows the implementation is wired to the behaviour. */
  smoke(name: string, body: Body): void;
  /** Whether this registration runs the full suite (for describe blocks whose cases are all full). */
  readonly isFull: boolean;
}

export function cases(coverage: Coverage): Cases {
  return {
    full: (name, body) => {
      if (coverage === 'full') it(name, body);
    },
    smoke: (name, body) => {
      it(name, body);
    },
    isFull: coverage === 'full',
  };
}
