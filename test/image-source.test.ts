import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { loadTask } from '../src/task/load.js';
import { runTrial } from '../src/trial/run.js';
import path from 'node:path';
import { docker, tempDir, trivialTask } from './helpers.js';
import { scriptAgent } from './support/attack-suite.js';

const PREBUILT = 'termgrade-test/prebuilt:1';

/** Harbor's precedence between a task's prebuilt image (docker_image) and its Dockerfile. */
describe('image source', () => {
  before(async () => {
    // A "prebuilt" image that differs from what the Dockerfile builds: no /from-dockerfile in it.
    await new Docker().getImage('debian:bookworm-slim').tag({ repo: 'termgrade-test/prebuilt', tag: '1' });
  });

  const files = (image: string) => ({
    'task.toml': `[environment]\ndocker_image = "${image}"\n`,
    'environment/Dockerfile': 'FROM debian:bookworm-slim\nRUN touch /from-dockerfile\nWORKDIR /app\n',
    'tests/test.sh':
      '#!/bin/bash\nif [ -f /from-dockerfile ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
  });

  it('runs on the named prebuilt image when it is here, and says so', async () => {
    const task = await loadTask(await trivialTask(files(PREBUILT)));
    const r = await runTrial({ task, agent: scriptAgent('true'), provider: docker(), outDir: await tempDir() });
    assert.equal(r.imageSource, 'prebuilt');
    assert.equal(r.image, PREBUILT);
    assert.equal(r.reward, 0, 'the prebuilt image has no /from-dockerfile');
  });

  it('builds the Dockerfile when the prebuilt image cannot be had, and says so', async () => {
    const task = await loadTask(await trivialTask(files('termgrade-test/absent:1')));
    const r = await runTrial({ task, agent: scriptAgent('true'), provider: docker(), outDir: await tempDir() });
    assert.equal(r.imageSource, 'dockerfile-fallback');
    assert.equal(r.reward, 1);
  });

  it('builds the Dockerfile when a build is forced', async () => {
    const task = await loadTask(await trivialTask(files(PREBUILT)));
    const prepared = await docker().prepare(task, { forceBuild: true });
    assert.equal(prepared.source, 'dockerfile');
    assert.notEqual(prepared.image, PREBUILT);
  });
});

describe('task image identity', () => {
  it('a base tag that moves to another image makes the next prepare rebuild, and trials record the image id', async () => {
    const engine = new Docker();
    const base = `termgrade-test/base-${process.pid}`;
    await engine.getImage('debian:bookworm-slim').tag({ repo: base, tag: '1' });
    const task = await loadTask(
      await trivialTask({
        'environment/Dockerfile': `FROM ${base}:1\nWORKDIR /app\n`,
        'tests/test.sh': '#!/bin/bash\nif [ -f /v2 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
      }),
    );
    const first = await docker().prepare(task);
    assert.equal((await docker().prepare(task)).cached, true);
    // The tag moves to a new image (what a registry push or a re-made base image does).
    const { packEntries } = await import('../src/sandbox/tar.js');
    const { Readable } = await import('node:stream');
    const stream = await engine.buildImage(
      Readable.from([
        await packEntries([{ path: 'Dockerfile', content: 'FROM debian:bookworm-slim\nRUN touch /v2\n' }]),
      ]) as unknown as NodeJS.ReadableStream,
      { t: `${base}:1` },
    );
    await new Promise((resolve, reject) =>
      engine.modem.followProgress(stream, (err) => (err ? reject(err) : resolve(null))),
    );
    const second = await docker().prepare(task);
    assert.equal(second.cached, false, 'rebuilt on the new base');
    assert.notEqual(second.image, first.image);
    const r = await runTrial({ task, agent: scriptAgent('true'), provider: docker(), outDir: await tempDir() });
    assert.equal(r.reward, 1, 'the trial ran on the new base');
    assert.equal(r.imageId, second.imageId);
    assert.match(r.imageId ?? '', /^sha256:/);
    await engine
      .getImage(`${base}:1`)
      .remove({ force: true })
      .catch(() => undefined);
  });
});

describe('BuildKit-only Dockerfiles', () => {
  it('the heredoc fixture builds (with BuildKit, its log kept and readable) and is admitted by check', async () => {
    const { cp, readFile: read, appendFile } = await import('node:fs/promises');
    const { checkTasks } = await import('../src/check/check.js');
    const { BUILDKIT } = await import('./helpers.js');
    const dir = path.join(await tempDir(), 'heredocs');
    await cp(path.join(BUILDKIT, 'heredocs'), dir, { recursive: true });
    // A fresh build every run: a line no cache holds.
    await appendFile(
      path.join(dir, 'environment', 'Dockerfile'),
      `RUN <<EOF\necho ${Date.now()}-${process.pid} > /stamp\nEOF\n`,
    );
    const out = await tempDir();
    const report = await checkTasks([dir], { provider: docker(), outDir: out, repeat: 1 });
    const t = report.tasks[0]!;
    assert.equal(t.verdict, 'admissible', t.details.join(' | '));
    assert.equal(t.imageCached, false);
    const log = await read(path.join(out, 'builds', 'heredocs.log'), 'utf8');
    assert.match(log, /^Dockerfile heredocs rewritten/);
    assert.match(log, /builder: BuildKit/);
    assert.match(log, /#\d+ \[\d\/\d\] COPY --chmod=755/, 'BuildKit steps decoded into a plain log');
  });
});
