import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import type { BuildNetwork } from '../src/sandbox/docker/build-network.js';
import { loadTask } from '../src/task/load.js';
import { runCli, tempDir, trivialTask } from './helpers.js';

/**
 * What a task's image build can reach: a listener on the host's loopback, started here, stands for
 * the host's services (a `serve` without a token, a Docker API on tcp). A RUN step tries to
 * connect to it; the listener records whether anything did. Only a build the operator put on the
 * host's network (--build-network host, TERMGRADE_BUILD_NETWORK, the engine settings file)
 * reaches it.
 */
const engine = new Docker();
const made: string[] = [];
let listener: net.Server;
let port = 0;
/** Connections, by the nonce the build sent. */
const reached = new Set<string>();

before(async () => {
  listener = net.createServer((socket) => {
    socket.setEncoding('utf8');
    let text = '';
    socket.on('data', (d) => (text += d));
    socket.on('end', () => reached.add(text.trim()));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  port = (listener.address() as net.AddressInfo).port;
});
after(async () => {
  listener.close();
  // The images built here only: each has its own nonce.
  for (const image of made)
    await engine
      .getImage(image)
      .remove({ force: true })
      .catch(() => undefined);
});

/** A task whose build sends its nonce to the host's loopback listener if it can, and succeeds either way. */
async function probingTask(nonce: string): Promise<string> {
  return trivialTask({
    'task.toml': `[task]\nname = "probe-${nonce}"\n`,
    'environment/Dockerfile': `FROM debian:bookworm-slim\nRUN bash -c 'if exec 3<>/dev/tcp/127.0.0.1/${port}; then echo ${nonce} >&3; exec 3>&-; echo reached; else echo unreached; fi' 2>&1\nWORKDIR /app\n`,
  });
}

/** Builds the task's image through a provider with this build network; whether the build reached the host. */
async function buildOn(network: BuildNetwork): Promise<{ reached: boolean; log: string; error: Error | null }> {
  const nonce = randomBytes(6).toString('hex');
  const task = await loadTask(await probingTask(nonce));
  const provider = new DockerProvider({ buildNetwork: network });
  try {
    const prepared = await provider.prepare(task);
    made.push(prepared.image);
    await new Promise((r) => setTimeout(r, 200)); // the listener's 'end' after the build's close
    return { reached: reached.has(nonce), log: prepared.log, error: null };
  } catch (err) {
    return { reached: reached.has(nonce), log: '', error: err as Error };
  } finally {
    await provider.closeAll();
  }
}

describe('image builds and the host network', () => {
  it('reach the host loopback only on the host network, asked for by name', async () => {
    const host = await buildOn({ name: 'host', from: 'this test' });
    assert.equal(host.error, null);
    assert.equal(
      host.reached,
      true,
      'a build on the host network reaches the host loopback (the test can see a connection)',
    );
    assert.match(host.log, /build network: host \(from this test\)/);

    const none = await buildOn({ name: 'none', from: 'this test' });
    assert.equal(none.error, null, 'a build with no network still builds');
    assert.equal(none.reached, false, 'a build with no network does not reach the host');
    assert.match(none.log, /build network: none/);
  });

  it("run on the engine's default network when nothing is set: never the host's loopback", async () => {
    const saved = { ...process.env };
    process.env.TERMGRADE_ENGINE_SETTINGS = path.join(await tempDir(), 'absent.json');
    delete process.env.TERMGRADE_BUILD_NETWORK;
    try {
      const { resolveBuildNetwork } = await import('../src/sandbox/docker/build-network.js');
      const network = resolveBuildNetwork();
      assert.deepEqual(network, { name: 'default', from: 'the engine default' });
      const r = await buildOn(network);
      assert.equal(r.reached, false);
      // An engine with no bridge (this kind of machine) has no default network: the build fails and says what to set.
      if (r.error) assert.match(r.error.message, /no default network \(dockerd --bridge=none\).*--build-network/);
    } finally {
      process.env = saved;
    }
  });

  it('take the setting from --build-network, TERMGRADE_BUILD_NETWORK or the engine settings file, in that order', async () => {
    const dir = await tempDir();
    const settings = path.join(dir, 'engine.json');
    await writeFile(settings, JSON.stringify({ build_network: 'host', reason: 'test' }));
    const trial = async (args: string[], env: Record<string, string | undefined>) => {
      const nonce = randomBytes(6).toString('hex');
      const r = await runCli(
        ['run-trial', await probingTask(nonce), '-o', path.join(dir, 'trials'), '--json', ...args],
        { env: { TERMGRADE_BUILD_NETWORK: undefined, ...env } },
      );
      assert.equal(r.status, 0, r.stderr);
      made.push((JSON.parse(r.stdout) as { image: string }).image);
      await new Promise((res) => setTimeout(res, 200));
      return reached.has(nonce);
    };
    assert.equal(
      await trial([], { TERMGRADE_ENGINE_SETTINGS: settings }),
      true,
      'the settings file asks for the host network',
    );
    assert.equal(
      await trial([], { TERMGRADE_ENGINE_SETTINGS: settings, TERMGRADE_BUILD_NETWORK: 'none' }),
      false,
      'the variable overrides the file',
    );
    assert.equal(
      await trial(['--build-network', 'none'], {
        TERMGRADE_ENGINE_SETTINGS: settings,
        TERMGRADE_BUILD_NETWORK: 'host',
      }),
      false,
      'the flag overrides both',
    );
    assert.equal(
      await trial(['--build-network', 'host'], { TERMGRADE_ENGINE_SETTINGS: path.join(dir, 'absent.json') }),
      true,
    );

    await writeFile(settings, JSON.stringify({ build_network: 'host; rm -rf /' }));
    const bad = await runCli(['run-trial', await trivialTask(), '-o', path.join(dir, 'trials')], {
      env: { TERMGRADE_ENGINE_SETTINGS: settings, TERMGRADE_BUILD_NETWORK: undefined },
    });
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(
      bad.stderr,
      new RegExp(`${settings.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: build_network: a Docker network name`),
    );
  });
});
