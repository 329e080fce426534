import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';

// The project's own eslint.config.js, run on seeded code: each rule the config promises must fire.
// The seeded files are not on disk, so no tsconfig lists them: they get typescript-eslint's default
// project (the same type-aware rules), which this test allows for their names alone.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const seeded = {
  allowDefaultProject: ['src/*/seeded-*.ts', 'test/seeded-*.ts'],
  maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 100,
};

async function findings(file: string, code: string): Promise<string[]> {
  const eslint = new ESLint({
    cwd: root,
    overrideConfig: { languageOptions: { parserOptions: { projectService: seeded } } },
  });
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  assert.ok(result, 'eslint returned no result');
  return result.messages.map((m) => `${m.ruleId ?? 'parse'}: ${m.message}`);
}

test('the linter catches a floating promise, a misused one, a long function and a layering break', async () => {
  const floating = await findings('src/util/seeded-floating.ts', 'async function f(): Promise<void> {}\nf();\n');
  assert.ok(
    floating.some((m) => m.startsWith('@typescript-eslint/no-floating-promises')),
    floating.join('\n'),
  );

  const handled = await findings('src/util/seeded-voided.ts', 'async function f(): Promise<void> {}\nvoid f();\n');
  assert.deepEqual(handled, []);

  const misused = await findings(
    'src/util/seeded-misused.ts',
    'const p = Promise.resolve(1);\nif (p) console.log(1);\n',
  );
  assert.ok(
    misused.some((m) => m.startsWith('@typescript-eslint/no-misused-promises')),
    misused.join('\n'),
  );

  const body = Array.from({ length: 81 }, (_, i) => `  const v${i} = ${i};`).join('\n');
  const long = await findings('src/util/seeded-long.ts', `export function f(): void {\n${body}\n}\n`);
  assert.ok(
    long.some((m) => m.startsWith('max-lines-per-function')),
    long.join('\n'),
  );

  const layering = await findings(
    'src/stats/seeded-layer.ts',
    "import { runJob } from '../job/run-job.js';\nexport const f = runJob;\n",
  );
  assert.ok(
    layering.some((m) => m.startsWith('local/layers')),
    layering.join('\n'),
  );

  const emptyCatch = await findings('src/util/seeded-catch.ts', 'try {\n  JSON.parse("x");\n} catch {}\n');
  assert.ok(
    emptyCatch.some((m) => m.startsWith('no-empty')),
    emptyCatch.join('\n'),
  );
});

test('the linter refuses a caught failure dropped without naming its case (local/catch-cause)', async () => {
  const silent = [
    'export async function f(p: Promise<number>): Promise<number | null> {\n  return p.catch(() => null);\n}\n',
    'export function f(p: Promise<number>): Promise<unknown> {\n  return p.then(\n    (v) => v,\n    () => undefined,\n  );\n}\n',
    'export function f(t: string): unknown {\n  try {\n    return JSON.parse(t);\n  } catch {\n    return null;\n  }\n}\n',
    'export function f(t: string): unknown {\n  try {\n    return JSON.parse(t);\n  } catch (err) {\n    return null;\n  }\n}\n',
  ];
  for (const [i, code] of silent.entries()) {
    const found = await findings(`src/util/seeded-silent-${i}.ts`, code);
    assert.ok(
      found.some((m) => m.startsWith('local/catch-cause')),
      `${code}\n${found.join('\n')}`,
    );
  }
  // Each form passes once it names its case, logs the cause, or handles a named case and rethrows.
  const handled = [
    'export async function f(p: Promise<number>): Promise<number | null> {\n  return p.catch(() => null); // the caller treats any failure as absent\n}\n',
    "import { logged } from './log.js';\nexport async function f(p: Promise<number>): Promise<number | null> {\n  return p.catch(logged('read f', null));\n}\n",
    "import { isMissing } from './errors.js';\nexport function f(t: () => string): string {\n  try {\n    return t();\n  } catch (err) {\n    if (isMissing(err)) return '';\n    throw err;\n  }\n}\n",
    'export function f(t: string): unknown {\n  try {\n    return JSON.parse(t);\n  } catch {\n    // Not JSON: read as nothing.\n    return null;\n  }\n}\n',
  ];
  for (const [i, code] of handled.entries()) {
    const found = await findings(`src/util/seeded-named-${i}.ts`, code);
    assert.deepEqual(
      found.filter((m) => m.startsWith('local/catch-cause')),
      [],
      code,
    );
  }
});

test('the linter refuses `any` in a test file too', async () => {
  const found = await findings('test/seeded-any.test.ts', 'export const f = (x: any): number => x as number;\n');
  assert.ok(
    found.some((m) => m.startsWith('@typescript-eslint/no-explicit-any')),
    found.join('\n'),
  );
});

test("the viewer's page script is linted with its own browser types (src/view/page/tsconfig.json)", async () => {
  // The real file, so its own tsconfig (DOM library) answers the type-aware rules; an unawaited
  // fetch() added at its end must be caught, and the file as it stands must pass.
  const file = 'src/view/page/app.ts';
  const code = await readFile(path.join(root, file), 'utf8');
  assert.deepEqual(await findings(file, code), []);
  const seeded = await findings(file, `${code}\nfetch('/api/summary');\ndocument.title.toUpperCase();\n`);
  assert.deepEqual(
    seeded.map((m) => m.split(':')[0]),
    ['@typescript-eslint/no-floating-promises'],
    seeded.join('\n'),
  );
});
