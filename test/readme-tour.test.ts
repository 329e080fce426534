import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ROOT, runShell } from './helpers.js';

/** The lines of README.md's command tour, as a user would copy them. */
function tourCommands(): string[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('<!-- tour:start -->');
  const end = readme.indexOf('<!-- tour:end -->');
  assert.ok(start >= 0 && end > start, 'README.md has the tour markers');
  return readme
    .slice(start, end)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('npx termgrade'));
}

describe("README's command tour", () => {
  it('runs every command as written, from the repository folder, with no package registry', async () => {
    const commands = tourCommands();
    assert.ok(commands.length >= 10, `the tour lists the commands (${commands.length})`);
    // The tour's own outputs from an earlier run are removed first, so it starts as a new user's would.
    await rm(path.join(ROOT, '.termgrade', 'jobs', 'tour'), { recursive: true, force: true });
    await rm(path.join(ROOT, '.termgrade', 'tour'), { recursive: true, force: true });
    for (const command of commands) {
      // An unreachable registry: if npx looked for termgrade there, the command would fail.
      const r = await runShell(command, {
        cwd: ROOT,
        env: { npm_config_registry: 'http://127.0.0.1:9/', npm_config_fetch_retries: '0' },
      });
      assert.equal(r.status, 0, `${command}\nexit ${r.status}\n${r.stderr.slice(-2000)}`);
      assert.doesNotMatch(r.stderr, /internal error|npm error/);
    }
  });
});
