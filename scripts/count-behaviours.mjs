#!/usr/bin/env node
// Behaviours a test run exercised, from node's TAP output (the CI log of `npm test`):
//   node scripts/count-behaviours.mjs LOG [LOG2]
// A behaviour is a distinct leaf test name: an `ok` / `not ok` line that is not a parent (a
// parent's line follows its subtests' `1..N` plan) and not a suite (`type: 'suite'` in its YAML
// block), its name taken without a trailing `[label]` (the label says which implementation a
// shared suite ran on, so one behaviour run on two backends counts once). With two logs it also
// lists the names only one of them has: what a change to the suite dropped or added.
import { readFileSync } from 'node:fs';

const RESULT = /^\s*(?:not )?ok \d+ - (.*?)(?:\s+# (?:SKIP|TODO)\b.*)?$/;
const PLAN = /^\s*1\.\.\d+\s*$/;

/** The leaf test names of a TAP log, one per leaf run, labels taken off. */
function leafNames(tap) {
  const lines = tap.split('\n');
  const names = [];
  lines.forEach((line, i) => {
    const m = RESULT.exec(line);
    if (!m || (i > 0 && PLAN.test(lines[i - 1]))) return;
    const block = [];
    for (let j = i + 1; j < lines.length && j <= i + 12 && lines[j].trim() !== '...'; j++) block.push(lines[j]);
    if (block.some((l) => l.includes("type: 'suite'"))) return;
    // A file that failed to load is reported under its path, not as a test.
    if (m[1].startsWith('/')) return;
    names.push(m[1].replace(/\s*\[[^\]]*\]\s*$/, ''));
  });
  return names;
}

const [first, second] = process.argv.slice(2);
if (!first) {
  console.error('usage: node scripts/count-behaviours.mjs LOG [LOG2]');
  process.exit(2);
}
const runs = [first, second].filter(Boolean).map((file) => {
  try {
    return leafNames(readFileSync(file, 'utf8'));
  } catch (err) {
    console.error(`${file}: ${err.message}`);
    process.exit(2);
  }
});
runs.forEach((names, i) =>
  console.log(`${[first, second][i]}: ${new Set(names).size} distinct behaviours in ${names.length} leaf runs`),
);
if (runs.length === 2) {
  const [a, b] = runs.map((names) => new Set(names));
  for (const name of [...a].filter((n) => !b.has(n)).sort()) console.log(`- ${name}`);
  for (const name of [...b].filter((n) => !a.has(n)).sort()) console.log(`+ ${name}`);
}
