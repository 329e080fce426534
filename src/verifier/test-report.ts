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

export function collectTests(files: VerifierFiles): { tests: TestResult[]; source: TestReportSource } {
  const found = findTests(files);
  return { ...found, tests: found.tests.map((t) => ({ ...t, name: canonicalTestName(t.name) })) };
}

function findTests(files: VerifierFiles): { tests: TestResult[]; source: TestReportSource } {
  if (files.ctrf !== null) {
    const tests = parseCtrf(files.ctrf);
    if (tests) return { tests, source: 'ctrf' };
  }
  if (files.stdout !== null) {
    const tests = parsePytestSummary(files.stdout);
    if (tests.length > 0) return { tests, source: 'pytest-rA' };
  }
  for (const xml of files.junit) {
    const tests = parseJunit(xml);
    if (tests.length > 0) return { tests, source: 'junit' };
  }
  return { tests: [], source: 'none' };
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
    return null;
  }
  const tests = (doc as { results?: { tests?: unknown } })?.results?.tests;
  if (!Array.isArray(tests)) return null;
  return tests
    .filter((t): t is Record<string, unknown> => t !== null && typeof t === 'object' && typeof t.name === 'string')
    .map((t) => ({
      name: t.name as string,
      status: normalizeStatus(t.status),
      durationMs: typeof t.duration === 'number' ? t.duration : null,
      message: typeof t.message === 'string' ? t.message : null,
    }));
}

const SUMMARY_LINE = /^(PASSED|FAILED|ERROR|XFAIL|XPASS)\s+(\S+::\S+?)(?:\s+-\s+(.*))?$/;
/** A file pytest could not collect (an import error, say): `ERROR tests/test_x.py - ModuleNotFoundError: ...`. */
const COLLECTION_ERROR_LINE = /^ERROR\s+(\S+\.py)(?:\s+-\s+(.*))?$/;

/** pytest `-rA` short summary: `PASSED path::test`, `FAILED path::test - message`. Last word wins. */
export function parsePytestSummary(text: string): TestResult[] {
  const byName = new Map<string, TestResult>();
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/\x1b\[[0-9;]*m/g, '').trim();
    const m = SUMMARY_LINE.exec(line);
    if (!m) {
      const c = COLLECTION_ERROR_LINE.exec(line);
      if (c) byName.set(c[1]!, { name: c[1]!, status: 'error', durationMs: null, message: `collection error: ${c[2] ?? 'pytest could not collect this file'}` });
      continue;
    }
    const word = m[1]!;
    const status: TestStatus =
      word === 'PASSED' || word === 'XFAIL' ? 'passed' : word === 'FAILED' || word === 'XPASS' ? 'failed' : 'error';
    byName.set(m[2]!, { name: m[2]!, status, durationMs: null, message: m[3] ?? null });
  }
  return [...byName.values()];
}

type XmlNode = Record<string, unknown>;
const asArray = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** JUnit XML (pytest --junitxml and most runners): testcase with failure / error / skipped children. */
export function parseJunit(xml: string): TestResult[] {
  let doc: XmlNode;
  try {
    doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '@' }).parse(xml) as XmlNode;
  } catch {
    return [];
  }
  const out: TestResult[] = [];
  const visitSuite = (suite: XmlNode): void => {
    for (const tc of asArray(suite.testcase as XmlNode | XmlNode[])) {
      const name = String(tc['@name'] ?? '');
      if (!name) continue;
      const cls = tc['@classname'] ? `${String(tc['@classname'])}::` : '';
      const failure = (tc.failure ?? tc.error) as XmlNode | string | undefined;
      const status: TestStatus = tc.failure !== undefined ? 'failed' : tc.error !== undefined ? 'error' : tc.skipped !== undefined ? 'skipped' : 'passed';
      const message = failure === undefined ? null : typeof failure === 'object' ? String(failure['@message'] ?? '') || null : String(failure) || null;
      const time = Number(tc['@time']);
      out.push({ name: cls + name, status, durationMs: Number.isFinite(time) ? time * 1000 : null, message });
    }
    for (const inner of asArray(suite.testsuite as XmlNode | XmlNode[])) visitSuite(inner);
  };
  const root = (doc.testsuites ?? doc) as XmlNode;
  for (const suite of asArray(root.testsuite as XmlNode | XmlNode[])) visitSuite(suite);
  return out;
}
