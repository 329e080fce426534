import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRewardFiles, primaryReward } from '../src/verifier/reward.js';
import { collectTests, parseCtrf, parseJunit, parsePytestSummary } from '../src/verifier/test-report.js';

describe('reward files', () => {
  it('prefers reward.json over reward.txt', () => {
    const r = parseRewardFiles('{"reward": 0.5, "partial": 0.25}', '1');
    assert.deepEqual(r, { ok: true, reward: 0.5, rewards: { reward: 0.5, partial: 0.25 }, source: 'reward.json' });
  });

  it('reads one number from reward.txt, whitespace allowed', () => {
    assert.deepEqual(parseRewardFiles(null, ' 1\n'), {
      ok: true,
      reward: 1,
      rewards: { reward: 1 },
      source: 'reward.txt',
    });
  });

  it('calls a missing reward a missing reward, never a 0', () => {
    const r = parseRewardFiles(null, null);
    assert.equal(r.ok, false);
    assert.equal(!r.ok && r.problem, 'missing');
  });

  it('rejects malformed files with the reason', () => {
    for (const [json, txt, pattern] of [
      ['{not json', null, /not JSON/],
      ['[1]', null, /object/],
      ['{"reward": "high"}', null, /"reward" is not a number/],
      ['{}', null, /empty/],
      [null, 'pass', /one number/],
      [null, '', /one number/],
    ] as const) {
      const r = parseRewardFiles(json, txt);
      assert.equal(r.ok, false);
      if (!r.ok) {
        assert.equal(r.problem, 'malformed');
        assert.match(r.message, pattern);
      }
    }
  });

  it('picks the primary reward: `reward`, else the only key, else the mean', () => {
    assert.equal(primaryReward({ a: 0, reward: 1 }), 1);
    assert.equal(primaryReward({ score: 0.3 }), 0.3);
    assert.equal(primaryReward({ a: 1, b: 0 }), 0.5);
  });
});

describe('per-test reports', () => {
  const ctrf = JSON.stringify({
    results: {
      tool: { name: 'pytest' },
      summary: { tests: 3, passed: 1, failed: 1, skipped: 1, pending: 0, other: 0 },
      tests: [
        { name: 'test_outputs.py::test_a', status: 'passed', duration: 12 },
        { name: 'test_outputs.py::test_b', status: 'failed', duration: 3, message: 'AssertionError: 1 != 2' },
        { name: 'test_outputs.py::test_c', status: 'skipped', duration: 0 },
      ],
    },
  });

  it('reads CTRF tests with status, duration and message', () => {
    assert.deepEqual(parseCtrf(ctrf), [
      { name: 'test_outputs.py::test_a', status: 'passed', durationMs: 12, message: null },
      { name: 'test_outputs.py::test_b', status: 'failed', durationMs: 3, message: 'AssertionError: 1 != 2' },
      { name: 'test_outputs.py::test_c', status: 'skipped', durationMs: 0, message: null },
    ]);
    assert.equal(parseCtrf('{"results": {}}'), null);
    assert.equal(parseCtrf('nope'), null);
  });

  it('reads pytest -rA summary lines, colours and all', () => {
    const out = [
      'test_outputs.py ..F                                      [100%]',
      '=========================== short test summary info ============================',
      'PASSED test_outputs.py::test_a',
      '\x1b[32mPASSED\x1b[0m test_outputs.py::test_param[1-2]',
      'FAILED test_outputs.py::test_b - assert 1 == 2',
      'ERROR test_outputs.py::test_c - fixture missing',
      'SKIPPED [1] test_outputs.py:9: no reason',
      '========================= 2 passed, 1 failed in 0.03s ==========================',
    ].join('\n');
    assert.deepEqual(parsePytestSummary(out), [
      { name: 'test_outputs.py::test_a', status: 'passed', durationMs: null, message: null },
      { name: 'test_outputs.py::test_param[1-2]', status: 'passed', durationMs: null, message: null },
      { name: 'test_outputs.py::test_b', status: 'failed', durationMs: null, message: 'assert 1 == 2' },
      { name: 'test_outputs.py::test_c', status: 'error', durationMs: null, message: 'fixture missing' },
    ]);
  });

  it('reads JUnit XML from pytest and nested suites', () => {
    const xml = `<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="3">
      <testcase classname="test_outputs" name="test_a" time="0.010"/>
      <testcase classname="test_outputs" name="test_b" time="0.002"><failure message="assert 1 == 2">trace</failure></testcase>
      <testsuite name="inner"><testcase name="test_c"><skipped/></testcase></testsuite>
    </testsuite></testsuites>`;
    assert.deepEqual(parseJunit(xml), [
      { name: 'test_outputs.py::test_a', status: 'passed', durationMs: 10, message: null },
      { name: 'test_outputs.py::test_b', status: 'failed', durationMs: 2, message: 'assert 1 == 2' },
      { name: 'test_c', status: 'skipped', durationMs: null, message: null },
    ]);
    assert.deepEqual(parseJunit('<broken'), []);
  });

  it('on equally complete reports, trusts CTRF first, then -rA lines, then JUnit', () => {
    const xml = '<testsuite><testcase name="x"/></testsuite>';
    assert.equal(collectTests({ ctrf, stdout: 'PASSED a.py::b', junit: [xml] }).source, 'ctrf');
    assert.equal(collectTests({ ctrf: null, stdout: 'PASSED a.py::b', junit: [xml] }).source, 'pytest-rA');
    assert.equal(collectTests({ ctrf: 'garbage', stdout: 'no summary', junit: [xml] }).source, 'junit');
    assert.deepEqual(collectTests({ ctrf: null, stdout: null, junit: [] }), {
      tests: [],
      source: 'none',
      counts: {},
      reports: {},
    });
  });
});

describe('real pytest output', () => {
  it('names a collection error (the missing module) instead of dropping it', () => {
    const out = [
      '==================================== ERRORS ====================================',
      '____________________ ERROR collecting tests/test_outputs.py ____________________',
      "E   ModuleNotFoundError: No module named 'numpy'",
      '=========================== short test summary info ============================',
      "ERROR tests/test_outputs.py - ModuleNotFoundError: No module named 'numpy'",
      '!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!',
    ].join('\n');
    const { tests } = collectTests({ ctrf: null, stdout: out, junit: [] });
    assert.deepEqual(tests, [
      {
        name: 'test_outputs.py',
        status: 'error',
        durationMs: null,
        message: "collection error: ModuleNotFoundError: No module named 'numpy'",
      },
    ]);
  });

  it('gives a test one name whatever directory pytest ran in', () => {
    for (const prefix of ['', 'tests/', '/tests/', '../tests/', '../../tests/', './tests/']) {
      const { tests } = collectTests({
        ctrf: null,
        stdout: `PASSED ${prefix}test_outputs.py::test_a\nFAILED ${prefix}test_outputs.py::TestX::test_b - boom`,
        junit: [],
      });
      assert.deepEqual(
        tests.map((t) => t.name),
        ['test_outputs.py::test_a', 'test_outputs.py::TestX::test_b'],
        prefix,
      );
    }
    const ctrf = JSON.stringify({ results: { tests: [{ name: '/tests/test_outputs.py::test_a', status: 'passed' }] } });
    assert.equal(collectTests({ ctrf, stdout: null, junit: [] }).tests[0]!.name, 'test_outputs.py::test_a');
    assert.equal(
      collectTests({ ctrf: null, stdout: 'PASSED src/mytests/test_x.py::t', junit: [] }).tests[0]!.name,
      'src/mytests/test_x.py::t',
      'only the tests folder is stripped',
    );
  });
});

describe('pytest node ids in every form', () => {
  const cases: Array<[string, string, string | null]> = [
    // [line after the status word, expected id, expected message]
    [
      'tests/test_outputs.py::test_required_files[/app/results.txt-results file]',
      'tests/test_outputs.py::test_required_files[/app/results.txt-results file]',
      null,
    ],
    ['a.py::t[z w] - boom', 'a.py::t[z w]', 'boom'],
    ['a.py::t[x - y] - assert [1] - 2 == 0', 'a.py::t[x - y]', 'assert [1] - 2 == 0'],
    ['a.py::t[[nested]-list]', 'a.py::t[[nested]-list]', null],
    ['a.py::t[caf\\xe9-\\u65e5\\u672c]', 'a.py::t[caf\\xe9-\\u65e5\\u672c]', null],
    ['a.py::t[café-日本] - unicode left unescaped', 'a.py::t[café-日本]', 'unicode left unescaped'],
    ['a.py::TestOuter::TestInner::test_x', 'a.py::TestOuter::TestInner::test_x', null],
    ['a.py::TestOuter::test_x[p::q] - AssertionError: no', 'a.py::TestOuter::test_x[p::q]', 'AssertionError: no'],
    ['a.py::test_plain - AssertionError: x - y', 'a.py::test_plain', 'AssertionError: x - y'],
  ];
  for (const [rest, id, message] of cases) {
    it(`reads ${rest}`, () => {
      for (const word of ['PASSED', 'FAILED', 'ERROR']) {
        const [t] = parsePytestSummary(`${word} ${rest}`);
        assert.ok(t, `${word} ${rest} parsed`);
        assert.equal(t.name, id);
        assert.equal(t.message, message);
        assert.equal(t.status, word === 'PASSED' ? 'passed' : word === 'FAILED' ? 'failed' : 'error');
      }
    });
  }

  it('keeps every parametrised test of a real summary, the failing one included', () => {
    const tests = parsePytestSummary('PASSED a.py::t[x y]\nFAILED a.py::t[z w] - boom\nPASSED a.py::u\n');
    assert.deepEqual(
      tests.map((t) => [t.name, t.status]),
      [
        ['a.py::t[x y]', 'passed'],
        ['a.py::t[z w]', 'failed'],
        ['a.py::u', 'passed'],
      ],
    );
  });

  it('takes the most complete report when reports disagree, and says which', () => {
    const junit = `<testsuites><testsuite>
      <testcase classname="tests.test_outputs" name="test_a" file="tests/test_outputs.py"/>
      <testcase classname="tests.test_outputs" name="test_b[x y]"><failure message="boom"/></testcase>
      <testcase classname="tests.test_outputs.TestC" name="test_c"/>
    </testsuite></testsuites>`;
    const r = collectTests({
      ctrf: null,
      stdout: 'PASSED tests/test_outputs.py::test_a\nsome line pytest printed oddly\n',
      junit: [junit],
    });
    assert.equal(r.source, 'junit');
    assert.deepEqual(r.counts, { 'pytest-rA': 1, junit: 3 });
    assert.deepEqual(
      r.tests.map((t) => [t.name, t.status]),
      [
        ['test_outputs.py::test_a', 'passed'],
        ['test_outputs.py::test_b[x y]', 'failed'],
        ['test_outputs.py::TestC::test_c', 'passed'],
      ],
    );
    const tie = collectTests({
      ctrf: JSON.stringify({ results: { tests: [{ name: 'test_outputs.py::test_a', status: 'passed' }] } }),
      stdout: 'PASSED test_outputs.py::test_a',
      junit: [],
    });
    assert.equal(tie.source, 'ctrf', 'on a tie, the most trusted report');
  });
});
