import { XMLParser } from 'fast-xml-parser';
import type { TestReportSource, TestResult, TestStatus } from './schema.js';

/**
 * Per-test results from whatever the verifier left, in order of trust: CTRF (pytest's
 * --ctrf report), then pytest's `-rA` summary lines in test-stdout, then JUnit XML. Pure.
 */
export interface VerifierFiles {
  ctrf: string | null;
  stdout: string | null;
  junit: string[];
}

export interface CollectedTests {
  tests: TestResult[];
  /** The report the tests were taken from. */
  source: TestReportSource;
  /** How many tests each report held: the choice is the most complete one. */
  counts: Partial<Record<TestReportSource, number>>;
  /** Every report's own tests (canonical names): the grade's evidence holds each against admission's. */
  reports: Partial<Record<TestReportSource, TestResult[]>>;
}

/**
 * Every report the verifier left is read, and the most complete one wins (most tests; on a tie,
 * CTRF, then pytest's summary, then JUnit): reports disagree when one drops tests another keeps
 * (a summary line a parser cannot read, a plugin that was not loaded), and a dropped failing test
 * would make a failed trial look clean. Names are made canonical (see `canonicalTestName`).
 */
export function collectTests(files: VerifierFiles): CollectedTests {
  const candidates: Array<{ source: TestReportSource; tests: TestResult[] }> = [];
  if (files.ctrf !== null) {
    const tests = parseCtrf(files.ctrf);
    if (tests) candidates.push({ source: 'ctrf', tests });
  }
  if (files.stdout !== null) candidates.push({ source: 'pytest-rA', tests: parsePytestSummary(files.stdout) });
  if (files.junit.length) candidates.push({ source: 'junit', tests: files.junit.flatMap(parseJunit) });
  const counts: CollectedTests['counts'] = {};
  const reports: CollectedTests['reports'] = {};
  for (const c of candidates) {
    c.tests = c.tests.map((t) => ({ ...t, name: canonicalTestName(t.name) }));
    counts[c.source] = c.tests.length;
    reports[c.source] = c.tests;
  }
  const best = candidates.reduce<(typeof candidates)[number] | null>(
    (a, c) => (c.tests.length > 0 && (!a || c.tests.length > a.tests.length) ? c : a),
    null,
  );
  if (!best) return { tests: [], source: 'none', counts, reports };
  return { tests: best.tests, source: best.source, counts, reports };
}

/**
 * A test's name as if pytest had run in /tests: pytest prints node ids relative to its rootdir,
 * which depends on where test.sh ran it (`test_outputs.py::t` from /tests, `tests/test_outputs.py::t`
 * from /, `../tests/...` from /app, `/tests/...` with an absolute path). One task's tests keep one
 * name whatever the verifier's working directory, so trials compare test by test.
 */
export function canonicalTestName(name: string): string {
  const at = name.indexOf('::');
  const file = at >= 0 ? name.slice(0, at) : name;
  const rest = at >= 0 ? name.slice(at) : '';
  const m = /^(?:\.\.\/)*\/?(?:\.\/)?tests\/(.+)$/.exec(file);
  return m ? `${m[1]}${rest}` : name;
}

function normalizeStatus(s: unknown): TestStatus {
  switch (String(s).toLowerCase()) {
    case 'passed':
    case 'pass':
      return 'passed';
    case 'failed':
    case 'fail':
      return 'failed';
    case 'skipped':
    case 'pending':
      return 'skipped';
    case 'error':
      return 'error';
    default:
      return 'other';
  }
}

/** CTRF: `results.tests[] {name, status, duration, message}`. Null when it is not a CTRF document. */
export function parseCtrf(text: string): TestResult[] | null {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    // Not JSON, so not CTRF: the next format is tried.
    return null;
  }
  const tests = (doc as { results?: { tests?: unknown } })?.results?.tests;
  if (!Array.isArray(tests)) return null;
  return tests
    .filter(
      (t: unknown): t is Record<string, unknown> =>
        t !== null && typeof t === 'object' && 'name' in t && typeof t.name === 'string',
    )
    .map((t) => ({
      name: t.name as string,
      status: normalizeStatus(t.status),
      durationMs: typeof t.duration === 'number' ? t.duration : null,
      message: typeof t.message === 'string' ? t.message : null,
    }));
}

const SUMMARY_WORDS: Record<string, TestStatus> = {
  PASSED: 'passed',
  XFAIL: 'passed',
  FAILED: 'failed',
  XPASS: 'failed',
  ERROR: 'error',
  SKIPPED: 'skipped',
};

/**
 * Splits what follows the status word of a `-rA` line into the node id and the message. A node id
 * may hold spaces, ` - ` and `::` inside its parametrisation brackets (`t[/app/x.txt-results file]`),
 * so the id runs to the first `]` that closes the last `[` of the id and is followed by the end of
 * the line or by ` - ` (the message separator); an id without brackets ends at the first ` - `.
 */
export function splitSummaryLine(rest: string): { id: string; message: string | null } | null {
  const sep = rest.indexOf('::');
  if (sep <= 0 || /\s/.test(rest.slice(0, sep))) return null; // not path::name
  const open = rest.indexOf('[', sep);
  const firstDash = rest.indexOf(' - ', sep);
  if (open >= 0 && (firstDash < 0 || open < firstDash)) {
    for (let i = rest.indexOf(']', open); i >= 0; i = rest.indexOf(']', i + 1)) {
      const after = rest.slice(i + 1);
      if (after === '') return { id: rest, message: null };
      if (after.startsWith(' - ')) return { id: rest.slice(0, i + 1), message: after.slice(3) };
    }
  }
  if (firstDash >= 0) return { id: rest.slice(0, firstDash), message: rest.slice(firstDash + 3) };
  return /\s/.test(rest) ? null : { id: rest, message: null };
}

/**
 * One line of pytest's `-rA` summary as `parsePytestSummary` reads it: the writer's side of that
 * grammar, so what termgrade asks a test.sh to print (synth's prompts) is what it parses. The id is
 * `file::name` with no whitespace outside brackets; a failure's reason follows ` - `.
 */
export function summaryLine(status: 'PASSED' | 'FAILED', id: string, why?: string): string {
  if (!splitSummaryLine(id)) throw new Error(`${id} is not a test id the summary parser reads (file::name)`);
  return why === undefined ? `${status} ${id}` : `${status} ${id} - ${why}`;
}

/** A file pytest could not collect (an import error, say): `ERROR tests/test_x.py - ModuleNotFoundError: ...`. */
const COLLECTION_ERROR_LINE = /^ERROR\s+(\S+\.py)(?:\s+-\s+(.*))?$/;

/** pytest `-rA` short summary: `PASSED path::test`, `FAILED path::test[p q] - message`. Last word wins. */
export function parsePytestSummary(text: string): TestResult[] {
  const byName = new Map<string, TestResult>();
  for (const raw of text.split(/\r?\n/)) {
    // eslint-disable-next-line no-control-regex -- pytest's colour codes (ESC [ ... m) are what this strips
    const line = raw.replace(/\x1b\[[0-9;]*m/g, '').trim();
    const space = line.indexOf(' ');
    const status = space > 0 ? SUMMARY_WORDS[line.slice(0, space)] : undefined;
    if (!status) continue;
    const rest = line.slice(space + 1).trimStart();
    // SKIPPED lines name a location and a reason (`SKIPPED [1] t.py:3: why`), not a node id.
    const parsed = status === 'skipped' ? null : splitSummaryLine(rest);
    if (parsed) {
      byName.set(parsed.id, { name: parsed.id, status, durationMs: null, message: parsed.message });
      continue;
    }
    const c = COLLECTION_ERROR_LINE.exec(line);
    if (c)
      byName.set(c[1]!, {
        name: c[1]!,
        status: 'error',
        durationMs: null,
        message: `collection error: ${c[2] ?? 'pytest could not collect this file'}`,
      });
  }
  return [...byName.values()];
}

type XmlNode = Record<string, unknown>;

/**
 * pytest's JUnit classname is the dotted module path plus any classes (`tests.test_outputs.TestX`);
 * written as a node id path (`tests/test_outputs.py::TestX`) so names match the other reports.
 * The module ends where the file attribute says, else before the first part that starts with a
 * capital letter (a class, by Python's convention). Names of other runners pass through unchanged.
 */
export function junitClassToPath(classname: string, file: string | null): string {
  const parts = classname.split('.');
  let moduleParts = parts.findIndex((p) => /^[A-Z]/.test(p));
  if (file && file.endsWith('.py')) moduleParts = file.replace(/\.py$/, '').split('/').filter(Boolean).length;
  if (moduleParts === -1) moduleParts = parts.length;
  if (moduleParts === 0 || parts.slice(0, moduleParts).some((p) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(p)))
    return classname;
  return [`${parts.slice(0, moduleParts).join('/')}.py`, ...parts.slice(moduleParts)].join('::');
}
const asArray = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** JUnit XML (pytest --junitxml and most runners): testcase with failure / error / skipped children. */
export function parseJunit(xml: string): TestResult[] {
  let doc: XmlNode;
  try {
    doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '@' }).parse(xml) as XmlNode;
  } catch {
    // Not XML a parser can read (a report cut short): no tests from this file.
    return [];
  }
  const out: TestResult[] = [];
  const visitSuite = (suite: XmlNode): void => {
    for (const tc of asArray(suite.testcase as XmlNode | XmlNode[])) {
      const name = String(tc['@name'] ?? '');
      if (!name) continue;
      const cls = tc['@classname']
        ? `${junitClassToPath(String(tc['@classname']), tc['@file'] === undefined ? null : String(tc['@file']))}::`
        : '';
      const failure = (tc.failure ?? tc.error) as XmlNode | string | undefined;
      const status: TestStatus =
        tc.failure !== undefined
          ? 'failed'
          : tc.error !== undefined
            ? 'error'
            : tc.skipped !== undefined
              ? 'skipped'
              : 'passed';
      const message =
        failure === undefined
          ? null
          : typeof failure === 'object'
            ? String(failure['@message'] ?? '') || null
            : String(failure) || null;
      const time = Number(tc['@time']);
      out.push({ name: cls + name, status, durationMs: Number.isFinite(time) ? time * 1000 : null, message });
    }
    for (const inner of asArray(suite.testsuite as XmlNode | XmlNode[])) visitSuite(inner);
  };
  const root = (doc.testsuites ?? doc) as XmlNode;
  for (const suite of asArray(root.testsuite as XmlNode | XmlNode[])) visitSuite(suite);
  return out;
}
