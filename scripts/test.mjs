#!/usr/bin/env node
// `npm test` after the build: the linter and the format check run beside node's test runner
// instead of before it. Both only read the sources and the tests mostly wait on the engine, so
// the two cores are shared rather than the checks adding their minute to the suite's wall time.
// The tests' output streams as it comes; each check's is printed whole when the tests are done,
// then the test runner's summary is repeated last, so the checks cannot bury it. Exit status: the
// first non-zero of the three.
import { spawn } from 'node:child_process';

const bin = (name) => new URL(`../node_modules/.bin/${name}`, import.meta.url).pathname;

/** Runs a check with its output kept; resolves with its exit status, output and time taken. */
function check(name, file, args) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', (err) => resolve({ name, status: 1, output: `${output}${err.message}\n`, ms: 0 }));
    child.on('close', (status, signal) =>
      resolve({ name, status: status ?? (signal ? 1 : 0), output, ms: Date.now() - started }),
    );
  });
}

const checks = Promise.all([
  check('lint', bin('eslint'), []),
  check('format check', bin('prettier'), ['--check', '.']),
]);

// The summary lines of node's TAP and spec reporters, kept to be printed again at the end.
const SUMMARY = /^(# )?(ℹ )?(tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) \d/;
const summary = [];
let pending = '';
const tests = await new Promise((resolve) => {
  const child = spawn(
    process.execPath,
    ['--test', '--test-concurrency=3', '--test-timeout=1200000', ...process.argv.slice(2), 'dist/test/'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  child.stdout.on('data', (d) => {
    process.stdout.write(d);
    const lines = (pending + d).split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) if (SUMMARY.test(line)) summary.push(line);
  });
  child.on('close', (status, signal) => resolve(status ?? (signal ? 1 : 0)));
});

let failed = tests;
for (const c of await checks) {
  const took = `${Math.round(c.ms / 1000)} s`;
  if (c.status === 0) {
    console.log(`# ${c.name}: passed (${took})`);
  } else {
    console.log(`# ${c.name}: FAILED, exit ${c.status} (${took})\n${c.output.trimEnd()}`);
    failed ||= c.status;
  }
}
if (summary.length) console.log(summary.join('\n'));
process.exitCode = failed;
