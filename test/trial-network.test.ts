import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { oracleAgent } from '../src/agent/oracle.js';
import { loadTask } from '../src/task/load.js';
import { runTrial } from '../src/trial/run.js';
import { INHIBIT_IPV4, overlapsPrivateRange, trialNetworkRefusal } from '../src/sandbox/docker/trial-network.js';
import { docker, tempDir, trivialTask } from './helpers.js';

const run = promisify(execFile);

describe('which networks may carry trials (pure)', () => {
  it('refuses private-range subnets and bridges where the host holds the gateway', () => {
    assert.equal(overlapsPrivateRange('10.1.0.0/16'), true);
    assert.equal(overlapsPrivateRange('172.20.0.0/16'), true);
    assert.equal(overlapsPrivateRange('192.168.5.0/24'), true);
    assert.equal(overlapsPrivateRange('172.15.0.0/16'), false);
    assert.equal(overlapsPrivateRange('100.64.77.0/24'), false);
    assert.equal(overlapsPrivateRange('0.0.0.0/0'), true);
    const ok = {
      Name: 'n',
      Driver: 'bridge',
      Options: { [INHIBIT_IPV4]: 'true' },
      IPAM: { Config: [{ Subnet: '100.64.77.0/24' }] },
    };
    assert.equal(trialNetworkRefusal(ok), null);
    assert.match(
      trialNetworkRefusal({ ...ok, IPAM: { Config: [{ Subnet: '172.18.0.0/16' }] } })!,
      /private-range subnet 172\.18\.0\.0\/16/,
    );
    assert.match(trialNetworkRefusal({ ...ok, Options: {} })!, /host holds the gateway address/);
    assert.equal(
      trialNetworkRefusal({ Name: 'm', Driver: 'macvlan', IPAM: { Config: [{ Subnet: '100.64.0.0/24' }] } }),
      null,
    );
    assert.match(trialNetworkRefusal({ Name: 'o', Driver: 'overlay' })!, /overlay driver/);
  });
});

// The plumbing of `run --network` on a real engine (this machine has no way out, so no internet is
// asked for): an allow_internet task's agent and verifier are on the named network, a task that
// does not ask for one is not, and the host holds no address on it.
describe('run --network keeps Harbor online semantics, never the host (real Docker)', () => {
  const net = `tg-trial-net-${process.pid}`;
  const subnet = '100.64.91.0/24';
  before(async () => {
    await run('docker', ['network', 'create', '--internal', '--subnet', subnet, '-o', `${INHIBIT_IPV4}=true`, net]);
  });
  after(async () => {
    await run('docker', ['network', 'rm', net]).catch(() => undefined);
  });

  const taskWith = (allow: boolean): Promise<string> =>
    trivialTask({
      'task.toml': `[task]\nname = "net-${allow}"\n\n[verifier]\ntimeout_sec = 60\n\n[agent]\ntimeout_sec = 60\n\n[environment]\nallow_internet = ${allow}\n`,
      'solution/solve.sh':
        '#!/bin/bash\nls /sys/class/net | sort > /app/agent-ifaces.txt\ncat /proc/net/fib_trie > /app/agent-addrs.txt\n',
      'tests/test.sh':
        '#!/bin/bash\nls /sys/class/net | sort > /logs/verifier/verifier-ifaces.txt\ncp /app/agent-ifaces.txt /app/agent-addrs.txt /logs/verifier/\necho 1 > /logs/verifier/reward.txt\n',
    });

  it("gives the network to an allow_internet task's agent and verifier only, and the host no address on it", async () => {
    const provider = docker();
    await provider.checkNetwork(net);
    const out = await tempDir();
    for (const allow of [true, false]) {
      const task = await loadTask(await taskWith(allow));
      const r = await runTrial({ task, agent: oracleAgent, provider, outDir: out, network: net });
      assert.equal(r.reward, 1, JSON.stringify(r.errors));
      const logs = path.join(out, r.trialId, 'verifier');
      const agentIfaces = (await readFile(path.join(logs, 'agent-ifaces.txt'), 'utf8')).split('\n').filter(Boolean);
      const verifierIfaces = (await readFile(path.join(logs, 'verifier-ifaces.txt'), 'utf8'))
        .split('\n')
        .filter(Boolean);
      if (allow) {
        assert.deepEqual(agentIfaces, ['eth0', 'lo']);
        assert.deepEqual(verifierIfaces, ['eth0', 'lo']);
        assert.match(await readFile(path.join(logs, 'agent-addrs.txt'), 'utf8'), /100\.64\.91\./);
      } else {
        assert.deepEqual(agentIfaces, ['lo']);
        assert.deepEqual(verifierIfaces, ['lo']);
      }
    }
    const hostAddrs = Object.values(networkInterfaces())
      .flatMap((l) => l ?? [])
      .map((a) => a.address);
    assert.ok(
      !hostAddrs.some((a) => a.startsWith('100.64.91.')),
      `the host holds an address on the trial network: ${hostAddrs.join(', ')}`,
    );
  });

  it('refuses a bridge where the host would hold the gateway address', async () => {
    const open = `${net}-gw`;
    await run('docker', ['network', 'create', '--internal', '--subnet', '100.64.92.0/24', open]);
    try {
      await assert.rejects(docker().checkNetwork(open), /host holds the gateway address/);
    } finally {
      await run('docker', ['network', 'rm', open]).catch(() => undefined);
    }
  });
});
