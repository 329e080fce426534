import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ESLint } from 'eslint';

// The layers of src/ as eslint.config.js states them (LAYERS, the one source of truth), run through
// ESLint with that config on seeded code, and through the two scripts that read the same lists.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Layer {
  layer: string;
  folders: Record<string, string[] | string>;
}
const config = (await import(pathToFileURL(path.join(root, 'eslint.config.js')).href)) as {
  LAYERS: Layer[];
  allowLists: (layers?: Layer[]) => Map<string, Set<string>>;
};
const allowed = config.allowLists();
const folders = [...allowed.keys()];
const layerOf = new Map(config.LAYERS.flatMap((l, i) => Object.keys(l.folders).map((f) => [f, i] as const)));

// Seeded files are not on disk, so no tsconfig lists them: typescript-eslint's default project
// takes them (the same type-aware rules), allowed for these names alone (two per src folder, and
// a few more: above the default limit of 8).
const eslint = new ESLint({
  cwd: root,
  overrideConfig: {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: ['src/*/seeded-*.ts', 'src/*/*/seeded-*.ts'],
          maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 100,
        },
      },
    },
  },
});

async function lint(file: string, code: string): Promise<Array<{ rule: string; message: string }>> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  assert.ok(result, 'eslint returned no result');
  return result.messages.map((m) => ({ rule: m.ruleId ?? 'parse', message: m.message }));
}

const layered = (found: Array<{ rule: string; message: string }>) => found.filter((m) => m.rule === 'local/layers');

function run(script: string, ...args: string[]): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [path.join(root, 'scripts', script), ...args], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}

describe('layers: every src folder imports only what its allow-list in LAYERS names', () => {
  it('every folder of src/ is in a layer, and no list names a folder above its own', async () => {
    const onDisk = (await import('node:fs'))
      .readdirSync(path.join(root, 'src'), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
      .sort();
    assert.deepEqual([...folders].sort(), onDisk);
    // What would fail: a list naming a higher folder (the config throws when it loads, so lint fails).
    const upward = config.LAYERS.map((l) => ({ ...l, folders: { ...l.folders } }));
    upward[3]!.folders = { sandbox: ['task', 'util', 'verifier'] };
    assert.throws(() => config.allowLists(upward), /sandbox \(engines\) may not import verifier: not below it/);
  });

  it('lint fails on every import a folder may not make (an upward one from every layer but the top), and passes its allowed ones', async () => {
    const upwardPerLayer = new Set<number>();
    for (const folder of folders) {
      const mine = allowed.get(folder)!;
      const refused = folders.filter((f) => f !== folder && !mine.has(f));
      const own = `src/${folder}/seeded-layers.ts`;
      const found = layered(await lint(own, refused.map((f) => `import '../${f}/x.js';\n`).join('')));
      assert.deepEqual(
        found.map((m) => /may not import src\/(\w+)/.exec(m.message)?.[1]).sort(),
        [...refused].sort(),
        `${own}: ${found.map((m) => m.message).join('\n')}`,
      );
      for (const f of refused) if (layerOf.get(f)! > layerOf.get(folder)!) upwardPerLayer.add(layerOf.get(folder)!);
      const ok = await lint(
        `src/${folder}/seeded-allowed.ts`,
        [...mine].map((f) => `import '../${f}/x.js';\n`).join(''),
      );
      assert.deepEqual(layered(ok), [], `${folder}'s allowed imports`);
    }
    // Each layer below the top had an upward import seeded (and refused).
    assert.deepEqual(
      [...upwardPerLayer].sort((a, b) => a - b),
      config.LAYERS.slice(0, -1).map((_, i) => i),
    );
  });

  it('sees every form of import, from a nested file, and never its own folder', async () => {
    const found = layered(
      await lint(
        'src/sandbox/docker/seeded-forms.ts',
        [
          "import type { JobSpec } from '../../job/spec.js';",
          "export { runJob } from '../../job/run-job.js';",
          "export * from '../../verifier/verify.js';",
          "export const later = (): Promise<unknown> => import('../../report/build.js');",
          "export type Store = import('../../store/store.js').JobStore;",
          'export type Spec = JobSpec;',
          "import '../pool/provider.js';",
          "import '../sandbox.js';",
          "import '../../task/task.js';",
        ].join('\n') + '\n',
      ),
    );
    assert.deepEqual(
      found.map((m) => /may not import src\/(\w+)/.exec(m.message)?.[1]),
      ['job', 'job', 'verifier', 'report', 'store'],
      found.map((m) => m.message).join('\n'),
    );
  });

  it('only the CLI imports the front door, nothing in src imports tests, and stats does no I/O', async () => {
    assert.match(
      layered(await lint('src/job/seeded-door.ts', "import '../index.js';\n"))[0]?.message ?? '',
      /front door/,
    );
    assert.deepEqual(layered(await lint('src/cli/seeded-door.ts', "import '../index.js';\n")), []);
    assert.match(
      layered(await lint('src/cli/seeded-tests.ts', "import '../../test/helpers.js';\n"))[0]?.message ?? '',
      /never imports outside src/,
    );
    const io = await lint(
      'src/stats/seeded-io.ts',
      "import { readFileSync } from 'node:fs';\nexport const r = readFileSync;\n",
    );
    assert.ok(
      io.some((m) => m.rule === 'no-restricted-imports'),
      io.map((m) => m.rule).join('\n'),
    );
  });

  it('lint fails on `any` and on an unused variable', async () => {
    const any = await lint('src/util/seeded-any.ts', 'export const f = (x: any): number => x as number;\n');
    assert.ok(
      any.some((m) => m.rule === '@typescript-eslint/no-explicit-any'),
      any.map((m) => m.rule).join('\n'),
    );
    const unused = await lint(
      'src/util/seeded-unused.ts',
      'export function f(): number {\n  const left = 1;\n  return 2;\n}\n',
    );
    assert.ok(
      unused.some((m) => m.rule === '@typescript-eslint/no-unused-vars'),
      unused.map((m) => m.rule).join('\n'),
    );
  });

  it("the doc's layer table is the one LAYERS gives, and a doctored one is refused", async () => {
    assert.equal(run('layers-doc.mjs', '--check').status, 0);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'termgrade-layers-'));
    try {
      const doc = await readFile(path.join(root, 'docs', 'architecture.md'), 'utf8');
      const doctored = doc.replace(
        '| `sandbox/` | `task/`, `util/` |',
        '| `sandbox/` | `task/`, `util/`, `verifier/` |',
      );
      assert.notEqual(doctored, doc, 'the seeded change found its row');
      await writeFile(path.join(dir, 'architecture.md'), doctored);
      const r = run('layers-doc.mjs', '--check', '--doc', path.join(dir, 'architecture.md'));
      assert.equal(r.status, 1, r.out);
      assert.match(r.out, /not what LAYERS in eslint\.config\.js says/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('folder-imports finds no upward edge and no cycle in src/, and names a seeded one', async () => {
    const tree = run('folder-imports.mjs');
    assert.equal(tree.status, 0, tree.out);
    assert.match(tree.out, /every one in its allow-list, no folder cycle/);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'termgrade-layers-'));
    try {
      await mkdir(path.join(dir, 'util'));
      await mkdir(path.join(dir, 'sandbox'));
      await mkdir(path.join(dir, 'stray'));
      await writeFile(path.join(dir, 'util', 'a.ts'), "import { b } from '../sandbox/b.js';\nexport const a = b;\n");
      await writeFile(path.join(dir, 'sandbox', 'b.ts'), "import { a } from '../util/a.js';\nexport const b = a;\n");
      await writeFile(path.join(dir, 'stray', 'c.ts'), 'export const c = 1;\n');
      const r = run('folder-imports.mjs', '--src', dir);
      assert.equal(r.status, 1, r.out);
      assert.match(r.out, /util\/a\.ts: imports \.\.\/sandbox\/b\.js \(util -> sandbox: not in util's allow-list\)/);
      assert.match(r.out, /folder cycle: sandbox, util/);
      assert.match(r.out, /src\/stray: in no layer/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
