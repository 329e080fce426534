/**
 * TEST DOUBLE. A scripted generator model for `synth`: a function script for ScriptedModelServer
 * that reads each request's JSON (stage, seed, round, recorded state, the failure to repair) and
 * answers with the part a given kind of candidate calls for: good parts, and broken ones that a
 * repair fixes or never fixes. Its tests are written from the recorded state in the request (the
 * solution's observed output and the input's recorded hash), as a grounded generator would.
 */
import type { ChatRequest, ScriptStep } from './scripted-model-server.js';

export const CANDIDATE_KINDS = [
  'good',
  /** The first environment fails to build (RUN exits non-zero); the repair builds. */
  'build_error',
  /** The first Dockerfile cannot parse (FRM); refused before any build; the repair parses. */
  'unparseable',
  /** The first solution writes the wrong file; the repair writes the right one. */
  'wrong_solution',
  /** The first tests pass with nothing done; the repaired tests check the observed output. */
  'weak_tests',
  /** The first environment holds the answer in the image; the repaired one does not. */
  'leak_fixed',
  /** The environment holds the answer in the image, whatever the repair. */
  'leak_always',
  /** The tests keep a reward already there, whatever the repair. */
  'forgeable',
  /** The first reply of every candidate is not JSON; asked again, it is good. */
  'malformed',
  /** Every environment fails to build. */
  'never_builds',
] as const;
export type CandidateKind = (typeof CANDIDATE_KINDS)[number];

interface Request {
  stage: string;
  candidate: string;
  round: number;
  seed: { id?: string; kind?: CandidateKind; words?: string[]; exemplar?: { name: string; instruction: string } };
  repair: { failure: { reasons: string[]; evidence: string[] }; previous: unknown } | null;
  solutionState?: { changes: Array<{ path: string; text: string | null; sha256: string | null }> };
  environmentState?: { tree: Array<{ path: string; sha256: string | null }> };
}

/** A seed line for a candidate of `kind`: its own input words, so no two candidates are the same task. */
export function seedFor(
  kind: CandidateKind,
  n: number,
): { id: string; kind: CandidateKind; topic: string; words: string[] } {
  const words = Array.from({ length: 11 + n * 3 + CANDIDATE_KINDS.indexOf(kind) }, (_, i) => `${kind}-${n}-w${i}`);
  return { id: `${kind}-${n}`, kind, topic: `reverse the lines of a text file (${kind})`, words };
}

const reply = (value: unknown): ScriptStep => ({
  reply: { content: JSON.stringify(value), usage: { prompt: 400, completion: 100 } },
});

/**
 * An exemplar seed is answered as a good candidate with its own input words (a different task of
 * the same skill), unless the exemplar's name says `copycat`: then the generator copies the
 * exemplar's instruction word for word, as a model ignoring the brief would.
 */
function exemplarWords(req: Request): string[] | undefined {
  if (!req.seed.exemplar) return req.seed.words;
  return Array.from({ length: 12 }, (_, i) => `${req.seed.id}-w${i}`);
}

/** What the scripted generator answers to one request. */
export function answer(req: Request, retried: boolean): ScriptStep {
  const kind = req.seed.kind ?? 'good';
  req.seed.words = exemplarWords(req);
  const repaired = req.repair !== null;
  const file = `${req.seed.id}.txt`;
  if (kind === 'malformed' && !retried)
    return {
      reply: { content: 'Sure! Here is the part you asked for: {"oops"', usage: { prompt: 400, completion: 20 } },
    };
  switch (req.stage) {
    case 'scenario':
      return reply({
        domain: 'text processing',
        startingState: `a list of words in /app/${file}`,
        goal: `write the lines of /app/${file} in reverse order to /app/out.txt`,
        constraints: ['offline'],
        checkable: ['/app/out.txt holds the lines, last first'],
        outputs: ['/app/out.txt'],
      });
    case 'environment': {
      const files = [{ path: file, content: `${(req.seed.words ?? ['a']).join('\n')}\n` }];
      const reversed = [...(req.seed.words ?? ['a'])].reverse().join('\n');
      let dockerfile = `FROM debian:bookworm-slim\nWORKDIR /app\nCOPY ${file} /app/${file}\n`;
      if ((kind === 'build_error' && !repaired) || kind === 'never_builds')
        dockerfile += 'RUN echo "the generator broke this build" >&2 && exit 7\n';
      if (kind === 'unparseable' && !repaired) dockerfile = dockerfile.replace('FROM', 'FRM');
      if ((kind === 'leak_fixed' && !repaired) || kind === 'leak_always') {
        files.push({ path: 'cache.txt', content: `${reversed}\n` });
        dockerfile += 'COPY cache.txt /var/backups/.last-answer\n';
      }
      return reply({
        dockerfile,
        files,
        statePaths: ['/app'],
        tools: ['bash', 'tac'],
        commands: [`wc -l /app/${file}`],
      });
    }
    case 'instruction':
      if (req.seed.exemplar?.name.includes('copycat')) return reply({ instruction: req.seed.exemplar.instruction });
      return reply({
        instruction: `Write the lines of /app/${file} (one word per line) in reverse order, last line first, to /app/out.txt.\n`,
      });
    case 'solution': {
      const target = kind === 'wrong_solution' && !repaired ? '/app/reversed.txt' : '/app/out.txt';
      return reply({ solveSh: `#!/bin/bash\ntac /app/${file} > ${target}\n` });
    }
    case 'tests': {
      // Expected values from execution: the output the solution really left, the input's recorded hash.
      const expected = req.solutionState?.changes.find((c) => c.path === '/app/out.txt')?.sha256 ?? 'missing';
      const inputHash = req.environmentState?.tree.find((e) => e.path === `/app/${file}`)?.sha256 ?? 'missing';
      const test = (name: string, cond: string): string =>
        `if ${cond}; then echo "PASSED test_outputs.py::${name}"; else echo "FAILED test_outputs.py::${name} - no"; ok=0; fi\n`;
      let body = '#!/bin/bash\nok=1\n';
      if (kind === 'weak_tests' && !repaired) body += test('test_app_exists', '[ -d /app ]');
      else {
        body += test('test_reversed', `[ "$(sha256sum < /app/out.txt 2>/dev/null | cut -c1-64)" = "${expected}" ]`);
        body += test('test_input_untouched', `[ "$(sha256sum < /app/${file} | cut -c1-64)" = "${inputHash}" ]`);
      }
      body +=
        kind === 'forgeable'
          ? '[ -f /logs/verifier/reward.txt ] || echo $ok > /logs/verifier/reward.txt\n'
          : 'echo $ok > /logs/verifier/reward.txt\n';
      return reply({ testSh: body });
    }
    default:
      return {
        fault: 'error',
        status: 400,
        body: { error: { message: `the scripted generator has no stage ${req.stage}` } },
      };
  }
}

/** The script for ScriptedModelServer: each request answered from its own content. */
export function scriptedGenerator(): (index: number, body: ChatRequest) => ScriptStep {
  return (_index, body) => {
    const user = body.messages.find((m) => m.role === 'user');
    const req = JSON.parse(String(user?.content ?? '{}')) as Request;
    // A second user message is the generator asking again after a refused reply.
    const retried = body.messages.filter((m) => m.role === 'user').length > 1;
    return answer(req, retried);
  };
}

/** What the script implies for each kind, with maxRounds 1: admitted or not, and the repairs by part. */
export const EXPECTED: Record<CandidateKind, { admitted: boolean; repairs: string[]; rejected?: string }> = {
  good: { admitted: true, repairs: [] },
  build_error: { admitted: true, repairs: ['environment'] },
  unparseable: { admitted: true, repairs: ['environment'] },
  wrong_solution: { admitted: true, repairs: ['solution'] },
  weak_tests: { admitted: true, repairs: ['tests'] },
  leak_fixed: { admitted: true, repairs: ['environment'] },
  leak_always: { admitted: false, repairs: ['environment'], rejected: 'solution_leaked' },
  forgeable: { admitted: false, repairs: ['tests'], rejected: 'reward_forgeable' },
  malformed: { admitted: true, repairs: [] },
  never_builds: { admitted: false, repairs: ['environment'], rejected: 'build_failed' },
};
