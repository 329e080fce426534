import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { shipImage } from '../../src/sandbox/pool/ship.js';
import { processAlive } from '../../src/util/process-alive.js';

/**
 * Extra Docker engines on this machine for multi-engine tests and benchmarks: each its own dockerd
 * with its own data root, exec root (and so its own containerd), socket and pid file, bridge and
 * iptables off like the main engine. The base image is copied in from the main engine (same id).
 * Engines are named after the process that starts them, so test files running side by side never
 * share one, and those of a process that died are stopped and removed by the next start.
 */
const RUN_DIR = '/run/termgrade-test-engines';
const DATA_DIR = '/var/lib/termgrade-test-engines';

export class TestEngine {
  readonly socket: string;
  readonly host: string;
  readonly docker: Docker;
  private readonly pidFile: string;
  private readonly dataRoot: string;
  private readonly execRoot: string;
  private readonly logFile: string;

  constructor(
    readonly name: string,
    owner = process.pid,
  ) {
    const id = `${owner}-${name}`;
    this.socket = path.join(RUN_DIR, `${id}.sock`);
    this.host = `unix://${this.socket}`;
    this.pidFile = path.join(RUN_DIR, `${id}.pid`);
    this.execRoot = path.join(RUN_DIR, id);
    this.dataRoot = path.join(DATA_DIR, id);
    this.logFile = path.join(DATA_DIR, `${id}.log`);
    this.docker = new Docker({ socketPath: this.socket });
  }

  get pid(): number | null {
    try {
      return Number(readFileSync(this.pidFile, 'utf8').trim()) || null;
    } catch {
      return null;
    }
  }

  /**
   * Starts the daemon and waits until it answers. After a kill, what the dead daemon left (its pid
   * file, its containerd) is cleared first, and a start that fails is tried again.
   */
  async start(): Promise<void> {
    mkdirSync(this.execRoot, { recursive: true });
    mkdirSync(this.dataRoot, { recursive: true });
    for (let attempt = 1; ; attempt++) {
      spawnSync('pkill', ['-9', '-f', `${this.execRoot}/containerd/containerd.toml`]);
      rmSync(this.pidFile, { force: true });
      if (await this.launch()) return;
      if (attempt === 3) throw new Error(`test engine ${this.name} did not start; see ${this.logFile}`);
    }
  }

  private async launch(): Promise<boolean> {
    const out = openSync(this.logFile, 'a');
    const child = spawn(
      'dockerd',
      [
        '--data-root',
        this.dataRoot,
        '--exec-root',
        this.execRoot,
        '-H',
        this.host,
        '--pidfile',
        this.pidFile,
        '--bridge=none',
        '--iptables=false',
        '--ip-forward=false',
        '--ip-masq=false',
      ],
      { detached: true, stdio: ['ignore', out, out] },
    );
    child.unref();
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (
        await this.docker.ping().then(
          () => true,
          () => false,
        )
      )
        return true;
      if (child.exitCode !== null) return false;
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill('SIGKILL');
    return false;
  }

  /** The main engine's image, copied in with its id. */
  async loadFromMain(ref = 'debian:bookworm-slim'): Promise<void> {
    const main = new Docker();
    const id = (await main.getImage(ref).inspect()).Id;
    if (
      (
        await this.docker
          .getImage(id)
          .inspect()
          .catch(() => null)
      )?.Id === id
    )
      return;
    await shipImage(main, this.docker, { tag: ref, id }, 120_000);
  }

  /** SIGKILL: the engine stops answering at once, as a crashed daemon does. */
  kill(): void {
    const pid = this.pid;
    if (pid) process.kill(pid, 'SIGKILL');
  }

  /** Stops the daemon (SIGTERM, then SIGKILL after 20 s) and waits until it is gone. */
  async stop(): Promise<void> {
    const pid = this.pid;
    if (!pid || !processAlive(pid)) return;
    process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + 20_000;
    while (processAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (processAlive(pid)) process.kill(pid, 'SIGKILL');
    while (processAlive(pid)) await new Promise((r) => setTimeout(r, 100));
  }

  /** Stops it and removes its data (images, containers' layers) and run folders. */
  async destroy(): Promise<void> {
    await this.stop();
    // Its containerd and the shims of containers a killed daemon left running.
    spawnSync('pkill', ['-9', '-f', this.execRoot]);
    unmountUnder(this.dataRoot);
    unmountUnder(this.execRoot);
    rmSync(this.execRoot, { recursive: true, force: true });
    rmSync(this.dataRoot, { recursive: true, force: true });
    rmSync(this.logFile, { force: true });
    rmSync(this.socket, { force: true });
    rmSync(this.pidFile, { force: true });
  }
}

/**
 * Mounts a daemon leaves when it is killed (its data root is bind-mounted onto itself, overlay
 * layers, netns files): unmounted, deepest first, so the folders can be removed.
 */
function unmountUnder(dir: string): void {
  const points = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((p) => p === dir || p.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const p of points) spawnSync('umount', ['-l', p]);
}

/** Engines of test processes that are gone: stopped and removed (a test run killed before its `after`). */
export async function removeOrphanEngines(): Promise<void> {
  const ids = new Set<string>();
  for (const dir of [RUN_DIR, DATA_DIR]) {
    if (existsSync(dir)) for (const f of readdirSync(dir)) ids.add(f.replace(/\.(pid|sock|log)$/, ''));
  }
  for (const id of ids) {
    const dash = id.indexOf('-');
    const owner = Number(id.slice(0, dash));
    if (dash < 1 || !Number.isInteger(owner) || processAlive(owner)) continue;
    await new TestEngine(id.slice(dash + 1), owner).destroy();
  }
}

/** Starts `n` engines named e1..en, each with the main engine's base image. */
export async function startEngines(n: number): Promise<TestEngine[]> {
  await removeOrphanEngines();
  const engines = Array.from({ length: n }, (_, i) => new TestEngine(`e${i + 1}`));
  await Promise.all(engines.map((e) => e.start()));
  await Promise.all(engines.map((e) => e.loadFromMain()));
  return engines;
}

/**
 * An sshd on 127.0.0.1 (a free port, its own host key and config) whose one authorized key runs
 * commands with DOCKER_HOST set to `socket`: an engine reached as `ssh://root@127.0.0.1:PORT`,
 * the way a remote machine's engine is. Needs Debian's openssh-server (scripts/setup.sh).
 */
export async function startSshEngine(socket: string): Promise<{ host: string; keyFile: string; stop: () => void }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'termgrade-sshd-'));
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const p = (probe.address() as { port: number }).port;
      probe.close(() => resolve(p));
    });
  });
  for (const key of ['host', 'client']) {
    const made = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, key)]);
    if (made.status !== 0) throw new Error(`ssh-keygen failed: ${made.stderr}`);
  }
  writeFileSync(
    path.join(dir, 'authorized_keys'),
    `environment="DOCKER_HOST=unix://${socket}" ${readFileSync(path.join(dir, 'client.pub'), 'utf8')}`,
    { mode: 0o600 },
  );
  writeFileSync(
    path.join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${dir}/host`,
      `AuthorizedKeysFile ${dir}/authorized_keys`,
      'PermitRootLogin prohibit-password',
      'PasswordAuthentication no',
      'PermitUserEnvironment yes',
      `PidFile ${dir}/sshd.pid`,
      'StrictModes no',
      'UsePAM no',
      '',
    ].join('\n'),
  );
  mkdirSync('/run/sshd', { recursive: true });
  const started = spawnSync('/usr/sbin/sshd', ['-f', path.join(dir, 'sshd_config'), '-E', path.join(dir, 'sshd.log')]);
  if (started.status !== 0) throw new Error(`sshd did not start: ${started.stderr}`);
  return {
    host: `ssh://root@127.0.0.1:${port}`,
    keyFile: path.join(dir, 'client'),
    stop: () => {
      try {
        process.kill(Number(readFileSync(path.join(dir, 'sshd.pid'), 'utf8').trim()), 'SIGTERM');
      } catch {
        // already gone
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
