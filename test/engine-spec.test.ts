import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { describe, it } from 'node:test';
import { openJob } from '../src/job/job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { runJob, type JobEvent } from '../src/job/run-job.js';
import { configStats } from '../src/report/aggregate.js';
import { splitByImage } from '../src/report/records.js';
import { toStatsRecord } from '../src/records/record.js';
import { ownerId, ownerIsAlive } from '../src/sandbox/docker/labels.js';
import { connectEngine } from '../src/sandbox/pool/engine-connect.js';
import { engineNameOf, parseEngineFlag } from '../src/sandbox/pool/engine-spec.js';
import { EnginePool } from '../src/sandbox/pool/provider.js';
import { tempDir, trivialTask } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';

/** The pool's pure parts: engine flags, owners, splitting by image, concurrency from capacity. */
describe('engine flags and job-file entries', () => {
  it('reads host, capacity, name, TLS folder, ssh key and labels', () => {
    const e = parseEngineFlag('ssh://ci@build-3.example:2222,capacity=12,name=b3,label.zone=eu,ssh-key=/keys/id');
    assert.deepEqual(e, {
      host: 'ssh://ci@build-3.example:2222',
      capacity: 12,
      name: 'b3',
      labels: { zone: 'eu' },
      sshKey: '/keys/id',
    });
    assert.equal(parseEngineFlag('unix:///run/e1.sock').capacity, 4);
    assert.equal(engineNameOf(parseEngineFlag('unix:///run/docker-7.sock')), 'docker-7');
    assert.equal(engineNameOf(parseEngineFlag('tcp://127.0.0.1:2375')), '127.0.0.1-2375');
  });

  it('refuses unknown options, bad capacities and names, naming the flag', () => {
    assert.throws(
      () => parseEngineFlag('unix:///e.sock,cap=3'),
      /--engine unix:\/\/\/e\.sock,cap=3: unknown option "cap=3"/,
    );
    assert.throws(() => parseEngineFlag('unix:///e.sock,capacity=0'), /capacity/);
    assert.throws(() => parseEngineFlag('unix:///e.sock,name=a b'), /name/);
    assert.throws(() => parseEngineFlag(''), /host/);
  });

  it('connects over the transport the host names, and refuses a remote engine over plain TCP', () => {
    const modem = (host: string) =>
      connectEngine(parseEngineFlag(host)).docker.modem as { socketPath?: string; protocol?: string };
    assert.equal(modem('unix:///run/e1.sock').socketPath, '/run/e1.sock');
    // ssh goes through a local socket tunnelled over one ssh connection (made on first use).
    const ssh = connectEngine(parseEngineFlag('ssh://ci@build-3.example:2222'));
    assert.match((ssh.docker.modem as { socketPath?: string }).socketPath ?? '', /termgrade-ssh-.*\/docker\.sock$/);
    ssh.close();
    assert.throws(
      () => connectEngine(parseEngineFlag('ssh://ci@build-3.example,ssh-key=/nonexistent/key')),
      /cannot read the ssh key \/nonexistent\/key/,
    );
    assert.equal(modem('tcp://localhost:2375').protocol, 'http');
    assert.throws(() => connectEngine(parseEngineFlag('tcp://203.0.113.9:2375')), /needs TLS client certificates/);
    assert.throws(
      () => connectEngine(parseEngineFlag('tcp://203.0.113.9:2376,tls=/nonexistent')),
      /cannot read \/nonexistent\/ca\.pem/,
    );
    assert.throws(() => connectEngine(parseEngineFlag('http://x')), /unknown scheme http:/);
  });

  it('validates engines in a job file like any other field', () => {
    assert.throws(
      () =>
        parseSpec(
          {
            name: 'j',
            tasks: { paths: ['x'] },
            agents: [{ agent: 'oracle' }],
            engines: [{ host: 'unix:///e.sock', capacity: -1 }],
          },
          'job.toml',
        ),
      /job\.toml.*engines\.0\.capacity/s,
    );
    const spec = parseSpec(
      { name: 'j', tasks: { paths: ['x'] }, agents: [{ agent: 'oracle' }], engines: [{ host: 'unix:///e.sock' }] },
      'job.toml',
    );
    assert.equal(spec.engines![0]!.capacity, 4);
    assert.equal(spec.concurrency, undefined);
    assert.throws(
      () => new EnginePool([parseEngineFlag('unix:///a/e.sock'), parseEngineFlag('unix:///b/e.sock')]),
      /two engines are named "e"/,
    );
  });
});

describe('owners across machines', () => {
  const [host, pid, start, machine, boot] = ownerId().split(':');
  it("carries this machine and boot; only this machine's dead processes are leftovers", () => {
    assert.equal(host, hostname());
    assert.equal(Number(pid), process.pid);
    assert.ok(machine && boot !== undefined);
    assert.equal(ownerIsAlive(ownerId()), true);
    assert.equal(ownerIsAlive(`${host}:999999:1:${machine}:${boot}`), false, 'a dead process of this machine');
    assert.equal(
      ownerIsAlive(`${host}:${pid}:${start}:0123456789ab:${boot}`),
      true,
      'same host name, another machine: not ours to judge',
    );
    assert.equal(ownerIsAlive(`other-host:999999:1:0123456789ab:ffffffffffff`), true);
    const bootNow = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8')
      .replace(/[^0-9a-f]/gi, '')
      .slice(0, 12);
    assert.equal(boot, bootNow);
    assert.equal(
      ownerIsAlive(`${host}:${pid}:${start}:${machine}:000000000000`),
      false,
      'this machine before its last boot',
    );
    // Owners written before machine and boot ids: the host name decides, as it did.
    assert.equal(ownerIsAlive(`${host}:999999:1`), false);
    assert.equal(ownerIsAlive(`other-host:999999:1`), true);
  });
});

describe('stats by image', () => {
  it('splits a configuration by the image id its trials ran on', () => {
    const rec = (id: string, reward: number, imageId: string | null) =>
      toStatsRecord({ trial_id: id, task: 't', agent: 'a', reward, image_id: imageId });
    const records = [
      rec('1', 1, 'sha256:aaaaaaaaaaaa1111'),
      rec('2', 0, 'sha256:aaaaaaaaaaaa1111'),
      rec('3', 1, 'sha256:bbbbbbbbbbbb2222'),
      rec('4', 1, null),
    ];
    const stats = configStats(splitByImage(records));
    assert.deepEqual(
      stats.map((c) => [c.config, c.trials, c.pass1.mean]),
      [
        ['a @?', 1, 1],
        ['a @aaaaaaaaaaaa', 2, 0.5],
        ['a @bbbbbbbbbbbb', 1, 1],
      ],
    );
    assert.deepEqual(
      configStats(records).map((c) => c.trials),
      [4],
    );
  });
});

describe('concurrency from the provider', () => {
  it("without a concurrency, a job runs as many trials at once as the provider's capacity", async () => {
    const tasks = await Promise.all(
      Array.from({ length: 3 }, (_, i) => trivialTask({ 'task.toml': `[task]\nname = "c${i}"\n` })),
    );
    const provider = Object.assign(new FakeProvider({ commandMs: 30 }), { capacity: 5 });
    const spec = parseSpec({ name: 'cap', tasks: { paths: tasks }, agents: [{ agent: 'oracle' }], k: 6 }, 'test');
    const job = await openJob(spec, await tempDir());
    const events: JobEvent[] = [];
    const summary = await runJob({
      spec: job.spec,
      tasks: job.tasks,
      store: job.store,
      provider,
      jobDir: job.jobDir,
      onEvent: (e) => events.push(e),
    });
    await job.close();
    assert.equal(summary.completed, 18);
    const start = events.find((e) => e.type === 'job-start');
    assert.equal(start?.type === 'job-start' && start.concurrency, 5);
    assert.equal(provider.maxOpen, 5, 'more sandboxes at once than the provider holds');
  });
});
