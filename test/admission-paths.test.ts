import assert from 'node:assert/strict';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import type { Task } from '../src/task/task.js';
import type { TrialResult } from '../src/trial/schema.js';
import {
  ADMISSION_DIR_ENV,
  admissionStore,
  DEFAULT_PROTECTION_DIR,
  ProtectionStore,
} from '../src/verifier/protection-store.js';
import type { ProtectionRecord } from '../src/verifier/protection.js';
import { runCli, tempDir, trivialTask, until } from './helpers.js';
import { type ServeReply } from './support/serve-call.js';

/**
 * The task's checker sources /etc/checker.conf when there is one: admission traces the verifier
 * looking it up and finding none. An agent that adds it (`exit 0`) forges a pass that no fixed
 * rule names (/etc/checker.conf is on no search path): only the task's admission record catches it.
 */
const CHECKER_TASK = {
  'task.toml': '[task]\nname = "checker"\n\n[verifier]\ntimeout_sec = 60\n\n[agent]\ntimeout_sec = 60\n',
  'environment/Dockerfile':
    "FROM debian:bookworm-slim\nRUN mkdir -p /opt/checker && printf '#!/bin/sh\\n[ -f /etc/checker.conf ] && . /etc/checker.conf\\ngrep -qx hello /app/out.txt\\n' > /opt/checker/check && chmod +x /opt/checker/check\nWORKDIR /app\n",
  'tests/test.sh':
    '#!/bin/bash\nif /opt/checker/check; then echo "PASSED t.py::test_hello"; echo 1 > /logs/verifier/reward.txt;\nelse echo "FAILED t.py::test_hello - no"; echo 0 > /logs/verifier/reward.txt; fi\n',
};
const FORGE = "printf 'exit 0\\n' > /etc/checker.conf";

/** A custom agent (loaded with --agent-import-path) that forges the checker's pass and does not do the task. */
const FORGER = `export default {
  name: 'forger',
  create() {
    return {
      name: 'forger',
      model: null,
      async setup() {},
      async run({ sandbox, signal }) {
        await sandbox.exec(['/bin/sh', '-c', ${JSON.stringify(FORGE)}], { signal, timeoutSec: 60 });
        return { exitReason: 'completed', message: null };
      },
    };
  },
};
`;

async function trialResults(trialsDir: string): Promise<TrialResult[]> {
  const ids = (await readdir(trialsDir, { withFileTypes: true })).filter((d) => d.isDirectory());
  return Promise.all(
    ids.map(
      async (d) => JSON.parse(await readFile(path.join(trialsDir, d.name, 'result.json'), 'utf8')) as TrialResult,
    ),
  );
}

function assertForgeCaught(r: TrialResult, recordFile: string): void {
  assert.equal(r.protection, 'admission', JSON.stringify(r.errors));
  assert.equal(r.admission?.file, recordFile);
  assert.equal(r.admission?.checksum, r.task.checksum);
  assert.equal(r.reward, 0, JSON.stringify({ errors: r.errors, tampering: r.tampering }));
  assert.deepEqual(
    r.tampering.map((t) => t.path),
    ['/etc/checker.conf'],
  );
}

describe('one admission record for every command that grades (real containers)', () => {
  let work: string;
  let taskDir: string;
  let forger: string;
  let recordFile: string;
  before(async () => {
    work = await tempDir('termgrade-admission-');
    taskDir = await trivialTask(CHECKER_TASK);
    forger = path.join(work, 'forger.mjs');
    await writeFile(forger, FORGER);
    // `check` with its default --jobs-dir records the task's protected set where every command looks.
    const checked = await runCli(['check', taskDir, '--probes', 'none', '--repeat', '1', '--json', '-q'], {
      cwd: work,
      env: { [ADMISSION_DIR_ENV]: undefined },
    });
    assert.equal(checked.status, 0, checked.stderr + checked.stdout);
    const files = await readdir(path.join(work, DEFAULT_PROTECTION_DIR));
    assert.equal(files.length, 1, `one record: ${files.join(', ')}`);
    recordFile = path.join(work, DEFAULT_PROTECTION_DIR, files[0]!);
  });

  it('`run` with another --jobs-dir than check grades against the record (and names it): the forged pass is 0', async () => {
    const jobsDir = path.join(work, 'elsewhere', 'jobs');
    const r = await runCli(
      ['run', '--tasks', taskDir, '--agent-import-path', forger, '--jobs-dir', jobsDir, '--name', 'j', '-q'],
      { cwd: work, env: { [ADMISSION_DIR_ENV]: undefined } },
    );
    assert.equal(r.status, 0, r.stderr + r.stdout);
    const [result, ...more] = await trialResults(path.join(jobsDir, 'j', 'trials'));
    assert.equal(more.length, 0);
    assertForgeCaught(result!, recordFile);
  });

  it('`run-trial` grades against the record (and names it): the forged pass is 0', async () => {
    const r = await runCli(
      ['run-trial', taskDir, '--agent-import-path', forger, '--out', path.join(work, 'trials'), '--json'],
      { cwd: work, env: { [ADMISSION_DIR_ENV]: undefined } },
    );
    assert.equal(r.status, 1, r.stderr);
    assertForgeCaught(JSON.parse(r.stdout) as TrialResult, recordFile);
  });

  it('--admission-dir and TERMGRADE_ADMISSION_DIR name the one folder records are read from', async () => {
    const other = await tempDir('termgrade-admission-other-');
    const named = await runCli(
      ['run-trial', taskDir, '--agent-import-path', forger, '--out', path.join(work, 'trials-named'), '--json'],
      { cwd: other, env: { [ADMISSION_DIR_ENV]: path.dirname(recordFile) } },
    );
    assertForgeCaught(JSON.parse(named.stdout) as TrialResult, recordFile);
    // A folder named explicitly is the only one read: no record there, the fixed rules only, said on the trial.
    const empty = await runCli(
      [
        'run-trial',
        taskDir,
        '--agent-import-path',
        forger,
        '--out',
        path.join(work, 'trials-empty'),
        '--admission-dir',
        path.join(other, 'none'),
        '--json',
      ],
      { cwd: work, env: { [ADMISSION_DIR_ENV]: path.dirname(recordFile) } },
    );
    const unprotected = JSON.parse(empty.stdout) as TrialResult;
    assert.equal(unprotected.protection, 'rules');
    assert.equal(unprotected.admission, null);
    assert.equal(unprotected.reward, 1, 'the fixed rules alone do not know /etc/checker.conf: what the record is for');
  });

  it('an oracle `run-trial` of a task never checked records its admission record, as `run` does', async () => {
    const records = await tempDir('termgrade-admission-oracle-');
    const fresh = await trivialTask({
      ...CHECKER_TASK,
      'task.toml': CHECKER_TASK['task.toml'].replace('checker', 'fresh'),
    });
    const args = ['run-trial', fresh, '--out', path.join(work, 'trials-oracle'), '--admission-dir', records, '--json'];
    const first = JSON.parse((await runCli(args, { cwd: work })).stdout) as TrialResult;
    assert.deepEqual([first.reward, first.protection], [1, 'rules']);
    const [file, ...more] = await readdir(records);
    assert.equal(more.length, 0);
    const second = JSON.parse((await runCli(args, { cwd: work })).stdout) as TrialResult;
    assert.deepEqual([second.reward, second.admission?.file], [1, path.join(records, file!)]);
  });

  describe('a serve session of the checked task (real HTTP on loopback)', () => {
    let server: RunningServer;
    let dataDir: string;
    before(async () => {
      dataDir = await tempDir();
      server = await startServer({
        provider: new DockerProvider(),
        tasks: await loadServedTasks([taskDir]),
        dataDir,
        maxSessions: 2,
        idleTtlSec: 120,
        admission: admissionStore({ admissionDir: path.dirname(recordFile) }),
      });
    });
    after(() => server?.close());

    const session = async (command: string): Promise<ServeReply> => {
      const call = async (url: string, body?: unknown) => {
        const res = await fetch(`${server.url}${url}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${server.token}` },
          body: JSON.stringify(body ?? {}),
        });
        const json = (await res.json()) as ServeReply;
        assert.ok(res.ok, JSON.stringify(json));
        return json;
      };
      const s = await call('/v1/sessions', { task: 'checker' });
      await call(`/v1/sessions/${s.session_id}/exec`, { command });
      return call(`/v1/sessions/${s.session_id}/verify`);
    };

    it('grades the forged pass 0 against the record and names it, in the answer and in grades.jsonl', async () => {
      const g = await session(FORGE);
      assert.equal(g.reward, 0, JSON.stringify(g));
      assert.equal(g.error_class, 'tampering');
      assert.equal(g.protection, 'admission');
      assert.equal(g.admission?.file, recordFile);
      // The record is appended after the answer (the trainer does not wait on it): wait for its line.
      const file = path.join(dataDir, 'grades.jsonl');
      const recorded = async (): Promise<string[]> =>
        (await readFile(file, 'utf8').catch(() => '')).split('\n').filter((l) => l.trim());
      await until('the grade in grades.jsonl', async () => (await recorded()).length > 0, 10_000);
      const line = JSON.parse((await recorded()).at(-1)!) as Record<string, unknown>;
      assert.deepEqual([line.reward, line.protection, line.admission_file], [0, 'admission', recordFile]);
    });

    it('still grades an honest session 1 against the record', async () => {
      const g = await session('echo hello > /app/out.txt');
      assert.deepEqual([g.reward, g.protection, g.admission?.file], [1, 'admission', recordFile], JSON.stringify(g));
    });
  });
});

describe('admissionStore: where records are found', () => {
  const task = (checksum: string): Task => ({ name: 't', checksum }) as unknown as Task;
  const record = (checksum: string): ProtectionRecord => ({
    schemaVersion: 1,
    task: 't',
    checksum,
    recordedAt: '2026-01-01T00:00:00.000Z',
    accessed: [],
    outputs: [],
    libraries: {},
  });

  it("reads the folder beside a command's --jobs-dir (where earlier versions wrote) when none is named", async () => {
    const root = await tempDir();
    const legacy = new ProtectionStore(path.join(root, 'old', 'protection'));
    await legacy.save(record('c1'));
    const store = admissionStore({ near: [path.join(root, 'old', 'jobs')] }, {});
    assert.equal(store.dir, path.resolve(DEFAULT_PROTECTION_DIR));
    assert.equal((await store.find(task('c1')))?.file, legacy.fileOf('c1'));
    assert.equal(await store.find(task('c2')), null);
    // Named (flag over environment): that folder only.
    assert.equal(admissionStore({ admissionDir: root }, { [ADMISSION_DIR_ENV]: '/x' }).dir, root);
    assert.equal(admissionStore({}, { [ADMISSION_DIR_ENV]: root }).alsoIn.length, 0);
    assert.throws(() => admissionStore({ admissionDir: ' ' }), /--admission-dir: give a folder/);
  });

  it('saves one record from several slots at once (k > 1 on a task never checked) without losing a write', async () => {
    // Each save renames its own temporary file: with one name per process, the second rename found
    // the first had already moved it (ENOENT), and the trial ended as an internal error.
    const dir = await tempDir();
    const store = new ProtectionStore(dir);
    await Promise.all(Array.from({ length: 8 }, () => store.save(record('c3'))));
    assert.equal((await new ProtectionStore(dir).find(task('c3')))?.record.checksum, 'c3');
    assert.deepEqual(
      (await readdir(dir)).filter((f) => f.endsWith('.tmp')),
      [],
      'no temporary file left behind',
    );
  });
});
