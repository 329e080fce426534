import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { exitCodeTable } from '../src/cli/exit-table.js';
import { ERROR_CODES, EXIT, exitCodeOf } from '../src/util/errors.js';
import { ROOT, runCli, tempDir } from './helpers.js';

describe('exit codes', () => {
  it("the README's table is the one rendered from util/errors.ts", () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const table = exitCodeTable();
    assert.ok(readme.includes(table), `README.md must hold this table (from src/cli/exit-table.ts):\n${table}`);
  });

  it('every error code maps to an exit code the table names, and the CLI exits with it', async () => {
    for (const code of Object.keys(ERROR_CODES) as (keyof typeof ERROR_CODES)[])
      assert.ok(Object.values(EXIT).includes(exitCodeOf(code) as never), code);
    // through the real command: a missing path is bad_input (2); an engine that does not answer, 3
    const missing = await runCli(['stats', path.join(await tempDir(), 'nowhere')]);
    assert.equal(missing.status, exitCodeOf('bad_input'), missing.stderr);
    assert.equal(missing.status, 2);
    const none = await runCli(['engines', '--engine', `unix://${path.join(await tempDir(), 'no.sock')}`]);
    assert.equal(none.status, EXIT.engine, none.stderr);
  });
});
