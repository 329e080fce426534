import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { mkdir, readFile, symlink } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { findTaskDirs, loadTask } from '../src/task/load.js';
import { TaskError } from '../src/util/errors.js';
import { EXAMPLES, tempDir, trivialTask } from './helpers.js';

async function loadError(dir: string): Promise<TaskError> {
  try {
    await loadTask(dir);
  } catch (err) {
    assert.ok(err instanceof TaskError, `expected TaskError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected the task to be rejected');
}

describe('task loading', () => {
  it('loads every bundled example with its name, limits and environment', async () => {
    const dirs = await findTaskDirs([EXAMPLES]);
    assert.ok(dirs.length >= 8, `expected at least 8 examples, found ${dirs.length}`);
    for (const dir of dirs) {
      const task = await loadTask(dir);
      assert.equal(task.name, path.basename(dir));
      assert.equal(task.environment.kind, 'dockerfile');
      assert.ok(task.solutionDir, `${dir} has a solution`);
      assert.equal(task.limits.network, false);
      assert.match(task.checksum, /^[0-9a-f]{64}$/);
    }
  });

  it('applies the field defaults and keeps unknown keys', async () => {
    const dir = await trivialTask({
      'task.toml':
        'version = "1.1"\nfuture_key = 7\n[task]\nname = "x"\n[environment]\nmemory = "2G"\nmcp_servers = []\n[metadata]\ndifficulty = "hard"\n[newtable]\na = 1\n',
    });
    const task = await loadTask(dir);
    assert.equal(task.config.verifier.timeout_sec, 900);
    assert.equal(task.config.agent.timeout_sec, 600);
    assert.equal(task.limits.memoryMb, 2048);
    assert.equal(task.limits.cpus, 1);
    assert.equal((task.config as Record<string, unknown>).future_key, 7);
    assert.deepEqual({ ...((task.config as Record<string, unknown>).newtable as object) }, { a: 1 });
    assert.deepEqual((task.config.environment as Record<string, unknown>).mcp_servers, []);
    assert.equal(task.config.metadata.difficulty, 'hard');
  });

  it('takes memory_mb over memory, and network_mode over allow_internet', async () => {
    const dir = await trivialTask({
      'task.toml':
        '[environment]\nmemory_mb = 512\nmemory = "4G"\nallow_internet = true\nnetwork_mode = "no-network"\n',
    });
    const task = await loadTask(dir);
    assert.equal(task.limits.memoryMb, 512);
    assert.equal(task.limits.network, false);
  });

  it('names the file and line of bad TOML', async () => {
    const err = await loadError(await trivialTask({ 'task.toml': '[task]\nname = "x"\n[verifier\n' }));
    assert.equal(err.file, 'task.toml');
    assert.match(err.message, /task\.toml: not valid TOML at line 3/);
  });

  it('names the key with a wrong type', async () => {
    const err = await loadError(await trivialTask({ 'task.toml': '[verifier]\ntimeout_sec = "soon"\n' }));
    assert.match(err.message, /task\.toml: \[verifier\.timeout_sec\]/);
  });

  it('rejects a missing instruction, test.sh or environment', async () => {
    const noInstruction = await trivialTask();
    await import('node:fs/promises').then((fs) => fs.rm(path.join(noInstruction, 'instruction.md')));
    assert.equal((await loadError(noInstruction)).file, 'instruction.md');

    const noTests = await trivialTask();
    await import('node:fs/promises').then((fs) => fs.rm(path.join(noTests, 'tests'), { recursive: true }));
    assert.equal((await loadError(noTests)).file, 'tests/test.sh');

    const noEnv = await trivialTask();
    await import('node:fs/promises').then((fs) => fs.rm(path.join(noEnv, 'environment'), { recursive: true }));
    assert.match((await loadError(noEnv)).message, /docker_image/);
  });

  it('accepts a named image instead of a Dockerfile', async () => {
    const dir = await trivialTask({ 'task.toml': '[environment]\ndocker_image = "debian:bookworm-slim"\n' });
    await import('node:fs/promises').then((fs) => fs.rm(path.join(dir, 'environment'), { recursive: true }));
    const task = await loadTask(dir);
    assert.deepEqual(task.environment, { kind: 'image', image: 'debian:bookworm-slim' });
  });

  it('refuses a symlink that escapes the task folder', async () => {
    const dir = await trivialTask();
    await symlink('/etc/passwd', path.join(dir, 'tests', 'passwd'));
    const err = await loadError(dir);
    assert.equal(err.file, 'tests/passwd');
    assert.match(err.message, /symlink escapes the task folder/);
  });

  it('refuses a top-level part that is a symlink out of the folder', async () => {
    const other = await trivialTask();
    const dir = await trivialTask();
    await import('node:fs/promises').then((fs) => fs.rm(path.join(dir, 'tests'), { recursive: true }));
    await symlink(path.join(other, 'tests'), path.join(dir, 'tests'));
    assert.match((await loadError(dir)).message, /tests: symlink escapes/);
  });

  it('allows a symlink that stays inside the task', async () => {
    const dir = await trivialTask();
    await symlink('../solution/solve.sh', path.join(dir, 'tests', 'solve-link.sh'));
    await loadTask(dir);
  });

  it('refuses a Dockerfile that copies from outside its context through ..', async () => {
    const err = await loadError(
      await trivialTask({ 'environment/Dockerfile': 'FROM debian:bookworm-slim\nCOPY ../tests /tests\n' }),
    );
    assert.match(err.message, /environment\/Dockerfile: COPY source "\.\.\/tests" escapes/);
  });

  it('gives the same checksum for the same content and a different one after an edit', async () => {
    const a = await loadTask(await trivialTask());
    const b = await loadTask(await trivialTask());
    const c = await loadTask(
      await trivialTask({ 'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n' }),
    );
    assert.equal(a.checksum, b.checksum);
    assert.notEqual(a.checksum, c.checksum);
    assert.ok(a.environment.kind === 'dockerfile' && c.environment.kind === 'dockerfile');
    assert.equal(a.environment.contentHash, c.environment.contentHash, 'tests do not change the image');
  });

  it('expands collections and single task folders, and names a missing folder', async () => {
    const single = await trivialTask();
    const dirs = await findTaskDirs([single, EXAMPLES]);
    assert.ok(dirs.includes(single));
    assert.ok(dirs.includes(path.join(EXAMPLES, 'csv-summary')));
    await assert.rejects(findTaskDirs(['/no/such/place']), /no such folder/);
  });

  it("leaves out a collection's hidden folders (synth's .synth record, a write's .partial)", async () => {
    const pool = await tempDir();
    for (const d of ['.synth', '.cand-1.partial', 'task-a']) await mkdir(path.join(pool, d));
    assert.deepEqual(await findTaskDirs([pool]), [path.join(pool, 'task-a')]);
  });
});

describe('Dockerfile reading', () => {
  it('finds every external image a Dockerfile builds from', async () => {
    const { baseImages, usesHeredocs } = await import('../src/task/dockerfile.js');
    const text = [
      '# syntax=docker/dockerfile:1',
      'ARG PY=3.13',
      'ARG BASE=python:${PY}-slim-bookworm',
      'FROM --platform=linux/amd64 ${BASE} AS build',
      'RUN echo \\',
      '  continued',
      'FROM build AS test',
      'COPY --from=build /a /a',
      'COPY --from=ghcr.io/astral-sh/uv:0.5 /uv /bin/uv',
      'FROM scratch',
      'FROM ubuntu:24.04',
    ].join('\n');
    assert.deepEqual(baseImages(text), ['python:3.13-slim-bookworm', 'ghcr.io/astral-sh/uv:0.5', 'ubuntu:24.04']);
    assert.equal(usesHeredocs(text), false);
    assert.equal(usesHeredocs('FROM x\nCOPY <<EOT /f\nhello\nEOT\n'), true);
  });
});

describe('Dockerfile heredocs rewritten for any builder', () => {
  it('turns RUN and COPY heredocs into exec-form RUNs and context files, flags kept', async () => {
    const { translateHeredocs } = await import('../src/task/dockerfile.js');
    const r = translateHeredocs(
      [
        'FROM x',
        'SHELL ["/bin/bash", "-o", "pipefail", "-c"]',
        'RUN <<EOF',
        '#!/usr/bin/env python3',
        'print(1)',
        'EOF',
        'RUN --mount=type=cache,target=/c python3 - <<PY > /out',
        'print("$HOME")',
        'PY',
        'COPY --chmod=600 <<a <<b /etc/',
        'A',
        'a',
        'B',
        'b',
        'RUN echo plain',
      ].join('\n'),
    )!;
    const lines = r.dockerfile.split('\n');
    assert.equal(lines[0], 'FROM x');
    const run1 = JSON.parse(lines[2]!.slice('RUN '.length)) as string[];
    assert.deepEqual(run1.slice(0, 4), ['/bin/bash', '-o', 'pipefail', '-c'], 'the SHELL in force is used');
    assert.match(
      run1[4]!,
      /cat > "\$f" <<'TG_HEREDOC_\d+'\n#!\/usr\/bin\/env python3\nprint\(1\)\nTG_HEREDOC_\d+\nchmod \+x "\$f" && "\$f"/,
    );
    assert.ok(lines[3]!.startsWith('RUN --mount=type=cache,target=/c ['));
    const run2 = JSON.parse(lines[3]!.slice(lines[3]!.indexOf('['))) as string[];
    assert.equal(
      run2[4],
      'python3 - <<PY > /out\nprint("$HOME")\nPY\n',
      'the shell reads the heredoc itself, expansion as BuildKit would',
    );
    assert.equal(lines[4], 'COPY --chmod=600 .termgrade-heredocs/0/a .termgrade-heredocs/0/b /etc/');
    assert.deepEqual(r.files, [
      { path: '.termgrade-heredocs/0/a', content: 'A\n' },
      { path: '.termgrade-heredocs/0/b', content: 'B\n' },
    ]);
    assert.equal(lines[5], 'RUN echo plain');
    assert.equal(translateHeredocs('FROM x\nRUN echo hi\n'), null, 'a file without heredocs is left alone');
  });
});

describe('Terminal-Bench 1 conversion', () => {
  it('converts a TB1 task into a Harbor task that check admits, and names what it could not carry over', async () => {
    const { convertTb1 } = await import('../src/task/convert.js');
    const { checkTasks } = await import('../src/check/check.js');
    const { docker, ROOT } = await import('./helpers.js');
    const out = await tempDir();
    const converted = await convertTb1(path.join(ROOT, 'test', 'fixtures', 'tb1'), out);
    assert.deepEqual(
      converted.map((c) => path.basename(c.to)),
      ['line-count', 'tmux-steps'],
    );
    const lc = await loadTask(path.join(out, 'line-count'));
    assert.equal(lc.instruction, 'Count the lines of /app/data.txt and write the number, alone, to /app/count.txt.\n');
    assert.equal(lc.config.agent.timeout_sec, 120);
    assert.equal(lc.config.verifier.timeout_sec, 60);
    assert.equal((lc.config.metadata as { difficulty?: string }).difficulty, 'easy');
    assert.deepEqual(
      converted[0]!.unconverted.map((u) => u.split(':')[0]),
      ['docker-compose.yaml'],
    );
    const tm = converted[1]!.unconverted.join('\n');
    assert.match(tm, /description variant/);
    assert.match(tm, /2 services \(client, db\)/);
    assert.match(tm, /solution\.yaml step 3: keystrokes/);
    assert.match(tm, /installs tools at test time/);
    assert.match(await readFile(path.join(out, 'tmux-steps', 'CONVERT.md'), 'utf8'), /Not carried over/);
    // A step that does not block is backgrounded as a whole command: the script parses.
    const solve = path.join(out, 'tmux-steps', 'solution', 'solve.sh');
    assert.match(await readFile(solve, 'utf8'), /^sleep 0\.1 &$/m);
    assert.equal(spawnSync('bash', ['-n', solve]).status, 0, 'solve.sh is valid bash');
    const report = await checkTasks([path.join(out, 'line-count')], {
      provider: docker(),
      outDir: await tempDir(),
      probes: 'fast',
    });
    assert.equal(report.tasks[0]!.verdict, 'admissible', report.tasks[0]!.details.join(' | '));
    assert.deepEqual(report.tasks[0]!.tests, ['test_outputs.py::test_count']);
  });
});
