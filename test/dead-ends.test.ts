import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import path from 'node:path';
import { describe, it } from 'node:test';
import Docker from 'dockerode';
import { parseSpec } from '../src/job/load-spec.js';
import { unknownTaskKeys } from '../src/task/unknown-keys.js';
import { clipMessage } from '../src/util/clip.js';
import { editDistance, nearestName } from '../src/util/nearest.js';
import { processAlive } from '../src/util/process-alive.js';
import { BROKEN, CLI, ROOT, runShell, tempDir, trivialTask } from './helpers.js';

/** Runs the built binary itself, as its shebang says (the way npx and an installed bin run it). */
function runBin(
  args: string[],
  options: { cwd?: string } = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(CLI, args, { cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

/** A folder of two tasks: "good" (which loads, with typo'd task.toml tables) and "broken" (task.toml is not TOML). */
async function mixedTasks(): Promise<{ root: string; broken: string }> {
  const root = await tempDir();
  const good = await trivialTask({
    'task.toml': '[task]\nname = "good"\n[agnet]\ntimeout_sec = 30\n[environment]\ncpu = 1\n',
  });
  await symlink(good, path.join(root, 'good'));
  const broken = path.join(root, 'broken');
  await mkdir(broken);
  await writeFile(path.join(broken, 'task.toml'), '[task\nname = "broken"\n');
  await writeFile(path.join(broken, 'instruction.md'), 'x\n');
  return { root, broken };
}

describe('no dead ends: run', () => {
  it('applies --task / --exclude-task before judging folders; --skip-invalid runs the rest and lists what it left out; a refused run leaves no job', async () => {
    const { root, broken } = await mixedTasks();
    const jobsDir = path.join(await tempDir(), 'jobs');

    // The broken folder is left out by the filter: it is never judged.
    const filtered = await runBin([
      'run',
      '--name',
      'filtered',
      '--tasks',
      root,
      '--exclude-task',
      'broken',
      '-a',
      'nop',
      '--jobs-dir',
      jobsDir,
      '-q',
    ]);
    assert.equal(filtered.status, 0, filtered.stderr);
    assert.match(
      filtered.stderr,
      /task\.toml: unknown section \[agnet\]; did you mean \[agent\]\?/,
      'the typo is a warning naming the file and the section meant',
    );
    assert.match(filtered.stderr, /unknown key "cpu" in \[environment\]; did you mean "cpus"\?/);
    const included = await runBin([
      'run',
      '--name',
      'included',
      '--tasks',
      root,
      '--task',
      'good',
      '-a',
      'nop',
      '--jobs-dir',
      jobsDir,
      '-q',
    ]);
    assert.equal(included.status, 0, included.stderr);

    // Kept by the filters, the broken folder refuses the run: exit 2, named, and no job made.
    const refused = await runBin(['run', '--name', 'x', '--tasks', root, '-a', 'nop', '--jobs-dir', jobsDir, '-q']);
    assert.equal(refused.status, 2, refused.stderr);
    assert.ok(refused.stderr.includes(broken), refused.stderr);
    assert.match(refused.stderr, /not valid TOML/);
    assert.match(refused.stderr, /--skip-invalid/);
    assert.equal(existsSync(path.join(jobsDir, 'x')), false, 'the refused run left no job folder');

    // The retry under the same name starts afresh (it is not told to resume) and skips the broken folder.
    const skipped = await runBin([
      'run',
      '--name',
      'x',
      '--tasks',
      root,
      '-a',
      'nop',
      '--skip-invalid',
      '--jobs-dir',
      jobsDir,
      '--jsonl',
    ]);
    assert.equal(skipped.status, 0, skipped.stderr);
    const events = skipped.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; tasks?: Array<{ path: string; message: string }> });
    const skipEvent = events.find((e) => e.type === 'tasks-skipped');
    assert.ok(skipEvent, 'the skipped folders are an event of --jsonl');
    assert.equal(skipEvent.tasks!.length, 1);
    assert.equal(skipEvent.tasks![0]!.path, broken);
    assert.match(skipEvent.tasks![0]!.message, /not valid TOML/);
    const done = events.find((e) => e.type === 'job-done') as unknown as {
      summary: { total: number; completed: number };
    };
    assert.equal(done.summary.total, 1, 'the good task ran');
    assert.equal(done.summary.completed, 1);
  });

  it('--skip-invalid says what it skipped on stderr, each folder with its error, and in the closing line', async () => {
    const { root, broken } = await mixedTasks();
    const jobsDir = path.join(await tempDir(), 'jobs');
    const r = await runBin([
      'run',
      '--name',
      'y',
      '--tasks',
      root,
      '-a',
      'nop',
      '--skip-invalid',
      '--jobs-dir',
      jobsDir,
    ]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        `skipped 1 task folder\\(s\\) that cannot be used \\(--skip-invalid\\):\\n  ${broken.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: task\\.toml: not valid TOML`,
      ),
    );
    assert.match(r.stdout, /1 invalid task folder\(s\) skipped/);
  });

  it("a missing --env-file is exit 2 naming the file (not Node's own exit 9), and leaves no job", async () => {
    const task = await trivialTask();
    const jobsDir = path.join(await tempDir(), 'jobs');
    const missing = path.join(await tempDir(), 'no-such.env');
    const r = await runBin([
      'run',
      '--name',
      'env',
      '--tasks',
      task,
      '-a',
      'nop',
      '--env-file',
      missing,
      '--jobs-dir',
      jobsDir,
    ]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(`termgrade: ${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: cannot read the env file \\(ENOENT\\)`),
    );
    assert.equal(existsSync(path.join(jobsDir, 'env')), false);
  });

  it('a job file with several unknown keys names every one at once, each with the key meant', async () => {
    const dir = await tempDir();
    const file = path.join(dir, 'job.yaml');
    await writeFile(
      file,
      `name: typos\ntasks: { paths: [${await trivialTask()}] }\nagents: [{ agent: nop, concurency: 2 }]\nkk: 4\nbudgetsec: 10\n`,
    );
    const r = await runBin(['run', file, '--jobs-dir', path.join(dir, 'jobs')]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /3 problems/);
    assert.match(r.stderr, /unknown key "kk" in \(top level\); did you mean "k"\?/);
    assert.match(r.stderr, /unknown key "budgetsec" in \(top level\); did you mean "budgetSec"\?/);
    assert.match(r.stderr, /unknown key "concurency" in agents\.0; did you mean "concurrency"\?/);
    assert.throws(
      () => parseSpec({ name: 'x', tasks: { paths: ['a'] }, agents: [{ agent: 'nop' }], kk: 1, kkk: 2 }, 'here'),
      /kk"[^]*kkk"/,
    );
  });
});

describe('typos: names meant', () => {
  it('editDistance and nearestName', () => {
    assert.equal(editDistance('agnet', 'agent'), 2);
    assert.equal(editDistance('enviroment', 'environment'), 1);
    assert.equal(editDistance('', 'abc'), 3);
    assert.equal(editDistance('kitten', 'sitting'), 3);
    assert.equal(nearestName('agnet', ['task', 'verifier', 'agent', 'environment']), 'agent');
    assert.equal(nearestName('ENVIROMENT', ['agent', 'environment']), 'environment', 'case is ignored');
    assert.equal(nearestName('zzzzzz', ['agent', 'environment']), null, 'nothing close: no guess');
  });

  it('unknownTaskKeys: unknown sections and keys of known sections, free-form tables left alone', () => {
    const w = unknownTaskKeys({
      task: { name: 'x', descripton: 'y' },
      agnet: { timeout_sec: 30 },
      enviroment: { cpus: 2 },
      environment: { cpus: 1, memory_mb: 512, gpu_types: ['a100'] },
      verifier: { timeout_sec: 10, env: { ANY_NAME: '1' } },
      metadata: { anything: 1, difficulty: 'hard' },
      version: '1.0',
    });
    assert.deepEqual(w, [
      'unknown key "descripton" in [task]; did you mean "description"? (ignored)',
      'unknown section [agnet]; did you mean [agent]? (ignored)',
      'unknown section [enviroment]; did you mean [environment]? (ignored)',
    ]);
    assert.deepEqual(unknownTaskKeys({ environment: { cpus: 1 } }), []);
  });

  it('clipMessage keeps a test failure message whole up to its bound, and says when it cut one', () => {
    const long = `AssertionError: expected ${'x'.repeat(1000)}`;
    assert.equal(clipMessage('assert 1 == 2\n  where 1 = f()'), 'assert 1 == 2 where 1 = f()');
    const cut = clipMessage(long);
    assert.ok(cut.startsWith(long.slice(0, 400)));
    assert.match(cut, /\[cut: 1025 chars in all\]$/);
  });
});

describe('CLI friction', () => {
  it('check lists each task once when stdout and stderr are one stream, and in full on stdout alone', async () => {
    const out = await tempDir();
    const cmd = `${JSON.stringify(CLI)} check ${JSON.stringify(path.join(BROKEN, 'invalid_task'))} -o ${JSON.stringify(out)} --probes none -r 1`;
    const together = await runShell(`${cmd} 2>&1`);
    assert.equal(together.status, 1, together.stdout);
    assert.equal(together.stdout.match(/FAIL invalid_task/g)?.length, 1, together.stdout);
    assert.match(together.stdout, /not valid TOML/, 'the problem is shown under the task');
    assert.match(together.stdout, /0 of 1 admissible/);
    const apart = await runShell(`${cmd} 2>/dev/null`);
    assert.equal(apart.stdout.match(/FAIL invalid_task/g)?.length, 1, 'stdout alone holds the whole report');
    assert.match(apart.stdout, /not valid TOML/);
  });

  it('run-trial on a build failure says where the build log is', async () => {
    const out = await tempDir();
    const r = await runBin(['run-trial', path.join(BROKEN, 'build_failed'), '-o', out]);
    assert.equal(r.status, 1, r.stderr);
    const m = /the image build failed; its log: (\S+\.log)/.exec(r.stderr);
    assert.ok(m, r.stderr);
    assert.ok(m[1]!.startsWith(out));
    assert.ok((await readFile(m[1]!, 'utf8')).length > 0, 'the log was written');
  });

  it('overlap says why a grid is all "-": too few trials per task', async () => {
    const file = path.join(await tempDir(), 'trials.jsonl');
    const row = (config: string, task: string, reward: number): string =>
      JSON.stringify({ trial_id: `${config}-${task}`, task, agent: config, attempt: 0, status: 'completed', reward });
    await writeFile(file, `${[row('a', 't1', 1), row('a', 't2', 0), row('b', 't1', 1)].join('\n')}\n`);
    const r = await runBin(['overlap', file]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(
      r.stdout,
      /a: none of its 2 task\(s\) has 4 graded trials \(at most 1\); run more trials \(-k\) or lower --min-trials/,
    );
    assert.match(r.stdout, /b: none of its 1 task\(s\) has 4 graded trials/);
    const inBand = await runBin(['overlap', file, '--min-trials', '1']);
    assert.match(
      inBand.stdout,
      /a: none of its 2 task\(s\) with >= 1 trials has a rate in band 0\.25-0\.75 \(1 below, 1 above\)/,
    );
  });
});

/** Whether something listens on the port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe('serve stops cleanly', () => {
  it("README's background recipe: SIGTERM to $! stops the server, frees its port and removes its sandboxes", async () => {
    // A project with termgrade installed, as the README's users have it.
    const project = await tempDir();
    await writeFile(path.join(project, 'package.json'), '{"name": "p", "version": "1.0.0", "private": true}\n');
    await mkdir(path.join(project, 'node_modules', '.bin'), { recursive: true });
    await symlink(CLI, path.join(project, 'node_modules', '.bin', 'termgrade'));
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    const recipe = /^ {4}(\S*termgrade serve [^\n]*&)\s*(#[^\n]*)?$/m.exec(readme);
    assert.ok(recipe, 'the README shows how to run serve in the background');
    const command = recipe[1]!
      .replace(/--tasks \S+/, `--tasks ${await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' })}`)
      .replace(/--port \d+/, '--port 0')
      .replace(/ &$/, ` --data-dir ${await tempDir()} &`);
    assert.match(command, /--port 0/);
    // The shell prints the pid it would kill ($!), then waits for the server.
    const sh = spawn('sh', ['-c', `${command}\necho "pid $!"\nwait`], {
      cwd: project,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    sh.stderr.on('data', (d: Buffer) => (stderr += d));
    const started = await new Promise<{ pid: number; url: string; token: string }>((resolve, reject) => {
      sh.stdout.on('data', (d: Buffer) => {
        stdout += d;
        const pid = /pid (\d+)/.exec(stdout);
        const line = stdout.split('\n').find((l) => l.startsWith('{'));
        if (pid && line) resolve({ pid: Number(pid[1]), ...(JSON.parse(line) as { url: string; token: string }) });
      });
      sh.once('exit', (code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
    });
    const port = Number(new URL(started.url).port);
    const created = await fetch(`${started.url}/v1/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${started.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ task: 'hello' }),
    });
    assert.equal(created.status, 201, await created.clone().text());
    const id = ((await created.json()) as { session_id: string }).session_id;
    const engine = new Docker();
    const mine = () => engine.listContainers({ all: true, filters: { label: [`io.termgrade.session=${id}`] } });
    assert.equal((await mine()).length, 1);

    process.kill(started.pid, 'SIGTERM'); // what `kill $!` does
    await new Promise((r) => sh.once('exit', r));
    assert.equal(processAlive(started.pid), false, `the server process is gone\n${stderr}`);
    assert.equal(await listening(port), false, 'its port is free');
    assert.equal((await mine()).length, 0, 'its sandbox is removed');
    assert.match(stderr, /stopped; every sandbox removed/);
  });
});
