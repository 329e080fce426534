import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { ROOT, tempDir, trivialTask } from './helpers.js';

/** The Python client and verl loop (integrations/) against a live server, run by the machine's python3. */
describe('python adapters against termgrade serve', () => {
  let server: RunningServer;
  before(async () => {
    const task = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    server = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([task]),
      dataDir: await tempDir(),
      maxSessions: 4,
    });
  });
  after(() => server.close());

  it('the client and the verl agent loop pass their tests', async () => {
    const child = spawn('python3', [path.join(ROOT, 'test', 'python', 'test_adapter.py')], {
      env: { ...process.env, TERMGRADE_URL: server.url, TERMGRADE_TOKEN: server.token },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    assert.equal(code, 0, output);
    assert.match(output, /python adapter tests: 10 ok of 10/);
  });
});
