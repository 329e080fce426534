import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { EnginePool } from '../src/sandbox/pool/provider.js';
import type { Sandbox, SandboxProvider, SandboxSnapshot } from '../src/sandbox/sandbox.js';
import { selfcheck, type CheckResult } from '../src/selfcheck/selfcheck.js';
import { CLI } from './helpers.js';
import { FakeProvider, type FakeSandbox } from './support/fake-provider.js';

/**
 * The shipped self-check: the Docker backend (through the CLI), an engine pool and the fake
 * provider pass it; a provider with a seeded defect fails the check that covers the defect.
 */

const byName = (results: CheckResult[]): Record<string, CheckResult['status']> =>
  Object.fromEntries(results.map((r) => [r.name, r.status]));

/** `inner`, with each started sandbox passed through `defect`. */
function withDefect(inner: SandboxProvider, defect: (s: Sandbox) => Sandbox): SandboxProvider {
  const p = Object.create(inner) as SandboxProvider;
  p.start = async (task, prepared, options) => defect(await inner.start(task, prepared, options));
  return p;
}

describe('selfcheck', () => {
  it('the Docker backend passes every check (termgrade selfcheck, exit 0)', () => {
    const r = spawnSync(process.execPath, [CLI, 'selfcheck'], { encoding: 'utf8', timeout: 900_000 });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /docker: 12 passed, 0 failed, 0 skipped/);
    assert.doesNotMatch(r.stdout, /^(FAIL|SKIP)/m);
  });

  it('an engine pool passes every check', async () => {
    const pool = new EnginePool([{ name: 'local', host: 'unix:///var/run/docker.sock', capacity: 2, labels: {} }]);
    after(() => pool.closeAll());
    const report = await selfcheck(pool);
    assert.equal(report.ok, true, JSON.stringify(report.results.filter((r) => r.status !== 'pass')));
    assert.ok(report.results.every((r) => r.status === 'pass'));
  });

  it('the fake provider passes what it can and skips, naming the capability, what it cannot do', async () => {
    const report = await selfcheck(new FakeProvider());
    assert.equal(report.ok, true, JSON.stringify(report.results.filter((r) => r.status === 'fail')));
    const status = byName(report.results);
    for (const n of ['files-in-out', 'snapshot-frozen', 'verifier-isolation', 'cleanup'])
      assert.equal(status[n], 'pass', n);
    const net = report.results.find((r) => r.name === 'network-isolation')!;
    assert.equal(net.status, 'skip');
    assert.match(net.detail, /fake backend lacks commands, networkIsolation/);
  });

  it("fails a backend whose snapshot shares the agent's live files", async () => {
    const live = (s: Sandbox): Sandbox => {
      const snapshot = async (): Promise<SandboxSnapshot> => {
        const real = await s.snapshot();
        return { ...real, readFile: (p, n) => s.readFile(p, n) };
      };
      return Object.assign(Object.create(s) as FakeSandbox, { snapshot });
    };
    const report = await selfcheck(withDefect(new FakeProvider(), live), { only: ['snapshot-frozen', 'files-in-out'] });
    assert.equal(report.ok, false);
    assert.deepEqual(byName(report.results), { 'files-in-out': 'pass', 'snapshot-frozen': 'fail' });
    assert.match(report.results.find((r) => r.name === 'snapshot-frozen')!.detail, /reads the live file/);
  });

  it('fails a backend whose exec ignores the timeout, within its own bound', async () => {
    const docker = new DockerProvider();
    after(() => docker.closeAll());
    const deaf = (s: Sandbox): Sandbox => {
      const exec: Sandbox['exec'] = (command, options = {}) => s.exec(command, { ...options, timeoutSec: undefined });
      return Object.assign(Object.create(s) as Sandbox, { exec });
    };
    const report = await selfcheck(withDefect(docker, deaf), { only: ['timeout'] });
    assert.equal(report.ok, false);
    assert.match(report.results[0]!.detail, /still running 10 s after its 1 s timeout/);
  });

  it("fails a backend whose fork's child shares the parent's files", async () => {
    const docker = new DockerProvider();
    after(() => docker.closeAll());
    // The "child" is a view of the parent itself: one container, one filesystem.
    const shared = (s: Sandbox): Sandbox => {
      const fork: Sandbox['fork'] = async () => ({
        children: [
          Object.create(s, { id: { value: `${s.id}-child` }, close: { value: async () => undefined } }) as Sandbox,
        ],
        services: [],
        notCarried: ['sleep 300'],
      });
      return Object.assign(Object.create(s) as Sandbox, { fork });
    };
    const report = await selfcheck(withDefect(docker, shared), { only: ['fork'] });
    assert.equal(report.ok, false);
    assert.match(report.results[0]!.detail, /the child's write reached the parent/);
  });
});
