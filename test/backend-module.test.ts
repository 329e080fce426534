import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { SELF_CHECKS, type CheckResult } from '../src/selfcheck/selfcheck.js';
import { CLI, runCli, runShell, tempDir, type Run } from './helpers.js';
import { CLI_DOCKER_IMAGE, CLI_DOCKER_LABEL } from './support/cli-docker-backend.js';

/**
 * A backend written from docs/architecture.md's "Add a backend" alone (test/support/cli-docker-backend.ts:
 * the `docker` command through child_process, the least the contract asks, every other method
 * from the defaults), loaded from outside with --backend-module, passes `termgrade selfcheck` on
 * real containers; the checks it lacks a capability for are skipped by name, never passed, and a
 * backend that takes no snapshot is failed by name on every check that grades.
 */

const BACKEND = path.join(path.dirname(CLI), '..', '..', 'test', 'support', 'cli-docker-backend.js');

interface Report {
  provider: string;
  ok: boolean;
  results: CheckResult[];
}

/** `termgrade selfcheck ARGS`, the real binary, to its end. */
const selfcheck = (args: string[]): Promise<Run> => runCli(['selfcheck', ...args]);

describe('a backend from outside (--backend-module)', () => {
  after(async () => {
    // What this backend made and a failed check could have left: its containers, its images.
    await runShell(`docker ps -aq --filter label=${CLI_DOCKER_LABEL}=true | xargs -r docker rm -f -v`);
    await runShell(`docker images -q ${CLI_DOCKER_IMAGE} | sort -u | xargs -r docker image rm -f`);
  });

  it('the cli-docker example backend passes selfcheck: every check but fork (skipped: it lacks fork), exit 0', async () => {
    const r = await selfcheck(['--backend-module', BACKEND, '--json']);
    const report = JSON.parse(r.stdout) as Report;
    assert.equal(report.provider, 'cli-docker');
    const failed = report.results.filter((c) => c.status === 'fail');
    assert.deepEqual(failed, [], JSON.stringify(failed, null, 1));
    assert.deepEqual(
      report.results.map((c) => c.name),
      SELF_CHECKS.map((c) => c.name),
      'every check ran',
    );
    const skipped = report.results.filter((c) => c.status === 'skip');
    assert.deepEqual(skipped, [{ name: 'fork', status: 'skip', detail: 'the cli-docker backend lacks fork', ms: 0 }]);
    assert.equal(report.ok, true);
    assert.equal(r.status, 0, r.stderr);
  });

  it('a backend that takes no snapshot fails, by name, each check that grades (never a pass)', async () => {
    const dir = await tempDir();
    const module = path.join(dir, 'no-snapshot.mjs');
    await writeFile(
      module,
      `import base from ${JSON.stringify(BACKEND)};
export default {
  name: 'no-snapshot',
  create: (o) => {
    const p = base.create(o);
    return { ...p, name: 'no-snapshot', start: async (...a) => { const s = await p.start(...a); s.snapshot = undefined; return s; } };
  },
};
`,
    );
    const graded = ['snapshot-frozen', 'attack-planted-reward-json'];
    const r = await selfcheck(['--backend-module', module, '--only', 'exec', ...graded, '--json']);
    const report = JSON.parse(r.stdout) as Report;
    assert.equal(r.status, 1, 'exit 1: a check failed');
    assert.equal(report.ok, false);
    const status = Object.fromEntries(report.results.map((c) => [c.name, c]));
    assert.equal(status.exec?.status, 'pass', 'what needs no snapshot still passes');
    for (const name of graded) {
      assert.equal(status[name]?.status, 'fail', name);
      assert.match(status[name]!.detail, /no-snapshot backend takes no snapshot/, name);
    }
  });

  it('a module that is not a backend is refused before anything starts: exit 2, naming the module and the problem', async () => {
    const dir = await tempDir();
    const module = path.join(dir, 'not-a-backend.mjs');
    await writeFile(module, 'export default { name: "x" };\n');
    const bad = await selfcheck(['--backend-module', module]);
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, new RegExp(`backend module ${module.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: .*create`));
    const absent = await selfcheck(['--backend-module', path.join(dir, 'absent.mjs')]);
    assert.equal(absent.status, 2, absent.stderr);
    assert.match(absent.stderr, /absent\.mjs: cannot be loaded: no such file/);
  });
});
