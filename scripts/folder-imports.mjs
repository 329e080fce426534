#!/usr/bin/env node
// Which src/ folders import which (static imports and re-exports, `import type` included), checked
// against the layers' allow-lists in eslint.config.js (LAYERS, the one source of truth): exits 1
// naming each import a folder's list does not allow (an upward or sideways edge), each src folder
// in no layer, and any folder cycle.
//   node scripts/folder-imports.mjs [--graph job,report,view,store,records,stats] [--src DIR]
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { allowLists } from '../eslint.config.js';

const arg = (name) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : null);
const src = path.resolve(arg('--src') ?? path.join(import.meta.dirname, '..', 'src'));
const allowed = allowLists();
const edges = new Map();
const broken = [];
const walk = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );
const folders = readdirSync(src, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name);
for (const folder of folders) {
  if (!allowed.has(folder)) broken.push(`src/${folder}: in no layer (add it to LAYERS in eslint.config.js)`);
  for (const file of walk(path.join(src, folder))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/^(?:import|export)[^'"]*?from\s+'([^']+)'/gm)) {
      if (!m[1].startsWith('.')) continue;
      const target = path.relative(src, path.resolve(path.dirname(file), m[1])).split(path.sep)[0];
      if (target === folder || target.endsWith('.js')) continue;
      const key = `${folder} -> ${target}`;
      edges.set(key, (edges.get(key) ?? 0) + 1);
      if (allowed.has(folder) && !allowed.get(folder).has(target))
        broken.push(`${path.relative(src, file)}: imports ${m[1]} (${key}: not in ${folder}'s allow-list)`);
    }
  }
}

/** Folder cycles in the import graph (Tarjan's strongly connected components of more than one folder). */
function cycles(nodes, next) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const out = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    for (const w of next(v)) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (stack.includes(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do scc.push((w = stack.pop()));
      while (w !== v);
      if (scc.length > 1) out.push(scc.sort());
    }
  };
  for (const v of nodes) if (!idx.has(v)) visit(v);
  return out;
}
const targetsOf = (v) => [...edges.keys()].filter((k) => k.startsWith(`${v} -> `)).map((k) => k.split(' -> ')[1]);
for (const scc of cycles(folders, targetsOf)) broken.push(`folder cycle: ${scc.join(', ')}`);

const shown = arg('--graph')?.split(',') ?? null;
for (const [key, n] of [...edges].sort()) {
  const [a, b] = key.split(' -> ');
  if (!shown || (shown.includes(a) && shown.includes(b))) console.log(`${key} (${n})`);
}
if (broken.length) {
  console.error(`folder import rules broken:\n  ${broken.join('\n  ')}`);
  process.exit(1);
}
console.log(`folder import rules hold: ${edges.size} folder edges, every one in its allow-list, no folder cycle`);
