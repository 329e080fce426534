#!/usr/bin/env node
// Which src/ folders import which (static imports, `import type` included), and the folder-level
// rules of the records layer: report and job meet only through src/records, which imports
// neither of them nor view. Exits 1 naming each import that breaks a rule.
//   node scripts/folder-imports.mjs [--graph job,report,view,store,records,stats]
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const src = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', 'src');
const FORBIDDEN = [
  ['job', 'report'],
  ['report', 'job'],
  ['records', 'job'],
  ['records', 'report'],
  ['records', 'view'],
  ['store', 'records'],
  ['store', 'job'],
  ['store', 'report'],
  ['stats', 'store'],
  ['stats', 'records'],
];
const edges = new Map();
const broken = [];
for (const folder of readdirSync(src, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name)) {
  const walk = (dir) =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
    );
  for (const file of walk(path.join(src, folder))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/^(?:import|export)[^'"]*?from\s+'([^']+)'/gm)) {
      if (!m[1].startsWith('.')) continue;
      const target = path.relative(src, path.resolve(path.dirname(file), m[1])).split(path.sep)[0];
      if (target === folder || target.endsWith('.js')) continue;
      const key = `${folder} -> ${target}`;
      edges.set(key, (edges.get(key) ?? 0) + 1);
      if (FORBIDDEN.some(([a, b]) => a === folder && b === target))
        broken.push(`${path.relative(src, file)}: imports ${m[1]} (${key})`);
    }
  }
}
const shown = process.argv.includes('--graph') ? process.argv[process.argv.indexOf('--graph') + 1].split(',') : null;
for (const [key, n] of [...edges].sort()) {
  const [a, b] = key.split(' -> ');
  if (!shown || (shown.includes(a) && shown.includes(b))) console.log(`${key} (${n})`);
}
if (broken.length) {
  console.error(`folder import rules broken:\n  ${broken.join('\n  ')}`);
  process.exit(1);
}
console.log('folder import rules hold');
