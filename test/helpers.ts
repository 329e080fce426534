import type { Coverage } from './support/coverage.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe } from 'node:test';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import type { TrialResult } from '../src/trial/schema.js';

/** The repository root, from dist/test/helpers.js or test/helpers.ts alike. */
export const ROOT = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  fileURLToPath(import.meta.url).includes('/dist/') ? '../..' : '..',
);
export const EXAMPLES = path.join(ROOT, 'examples', 'tasks');
export const BROKEN = path.join(ROOT, 'test', 'fixtures', 'broken');
export const BUILDKIT = path.join(ROOT, 'test', 'fixtures', 'buildkit');
export const CLI = path.join(ROOT, 'dist', 'src', 'cli', 'main.js');

const temps: string[] = [];
after(async () => {
  await Promise.all(temps.map((d) => rm(d, { recursive: true, force: true })));
});

/**
 * The admission records the CLI reads and writes in this test file (`check`, an oracle trial):
 * its own folder, never the repository's .termgrade/protection, so no test grades against a record
 * another test made. A test of the default location sets TERMGRADE_ADMISSION_DIR to undefined.
 */
export const TEST_ADMISSION_DIR = path.join(tmpdir(), `termgrade-admission-${process.pid}-${Date.now().toString(36)}`);
temps.push(TEST_ADMISSION_DIR);

export async function tempDir(prefix = 'termgrade-test-'): Promise<string> {
  const d = await mkdtemp(path.join(tmpdir(), prefix));
  temps.push(d);
  return d;
}

/** Writes a task folder from a map of relative path -> content (".sh" files made executable). */
export async function makeTask(files: Record<string, string>): Promise<string> {
  const dir = await tempDir('termgrade-task-');
  for (const [rel, content] of Object.entries(files)) {
    const file = path.join(dir, rel);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, content, { mode: rel.endsWith('.sh') ? 0o755 : 0o644 });
  }
  return dir;
}

/** A minimal valid task on the local debian base image; override any file. */
export function trivialTask(overrides: Record<string, string> = {}): Promise<string> {
  return makeTask({
    'task.toml': '[task]\nname = "trivial"\n\n[verifier]\ntimeout_sec = 30\n\n[agent]\ntimeout_sec = 30\n',
    'instruction.md': 'Write hello into /app/out.txt.\n',
    'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    'solution/solve.sh': '#!/bin/bash\necho hello > /app/out.txt\n',
    'tests/test.sh':
      '#!/bin/bash\nif [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then echo "PASSED t.py::test_hello"; echo 1 > /logs/verifier/reward.txt;\nelse echo "FAILED t.py::test_hello - no"; echo 0 > /logs/verifier/reward.txt; fi\n',
    ...overrides,
  });
}

let provider: DockerProvider | null = null;
/** One provider for a test file; every sandbox it opened is closed when the file ends. */
export function docker(): DockerProvider {
  if (!provider) {
    provider = new DockerProvider();
    const p = provider;
    after(() => p.closeAll());
  }
  return provider;
}

/**
 * Suites registered once per command path of the Docker backend: through its persistent helper
 * shell, and through a new engine exec per command (the provider option execVia: 'engine'). Both
 * keep the Sandbox contract, so backend-neutral suites run on both: in full on the helper shell,
 * and on the engine exec path in full where its code differs for the behaviour (commands, the
 * snapshot's reads) or as the smoke subset where it does not (see support/coverage.ts).
 */
export function onEachDockerExecPath(
  engineExec: Coverage,
  register: (label: string, provider: () => DockerProvider, coverage: Coverage) => void,
): void {
  onDockerExecPath('helper shell', 'full', register);
  onDockerExecPath('engine exec', engineExec, register);
}

export const DOCKER_EXEC_PATHS = ['helper shell', 'engine exec'] as const;

/** Registers suites for one command path of the Docker backend (a long suite gets a file per path). */
export function onDockerExecPath(
  via: (typeof DOCKER_EXEC_PATHS)[number],
  coverage: Coverage,
  register: (label: string, provider: () => DockerProvider, coverage: Coverage) => void,
): void {
  describe(`docker backend, commands via ${via}`, () => {
    let mine: DockerProvider | null = null;
    after(() => mine?.closeAll());
    register(
      `docker, ${via}`,
      () => (mine ??= new DockerProvider({ execVia: via === 'engine exec' ? 'engine' : 'shell' })),
      coverage,
    );
  });
}

export interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

type RunOptions = {
  env?: Record<string, string | undefined>;
  cwd?: string;
  killOn?: (e: Record<string, unknown>) => boolean;
};

/** Runs a program and collects its output; `killOn` SIGKILLs it at the first JSON event on stdout that matches. */
function runProcess(file: string, args: string[], options: RunOptions): Promise<Run & { killed: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      env: { ...process.env, TERMGRADE_ADMISSION_DIR: TEST_ADMISSION_DIR, ...options.env },
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let pending = '';
    let killed = false;
    child.stdout.on('data', (d: Buffer) => {
      stdout += d;
      pending += d;
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        if (!options.killOn || killed || !line.startsWith('{')) continue;
        try {
          if (options.killOn(JSON.parse(line))) {
            killed = true;
            child.kill('SIGKILL');
          }
        } catch {
          // not an event line
        }
      }
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('exit', (status) => resolve({ status, stdout, stderr, killed }));
  });
}

/** Runs the CLI (`nodeArgs` go to node before it); `killOn` as for runProcess. */
export function runCli(
  args: string[],
  options: RunOptions & { nodeArgs?: string[] } = {},
): Promise<Run & { killed: boolean }> {
  return runProcess(process.execPath, [...(options.nodeArgs ?? []), CLI, ...args], options);
}

/** Runs a shell command line as a user would type it (for documented commands). */
export function runShell(command: string, options: { cwd?: string; env?: Record<string, string> } = {}): Promise<Run> {
  return runProcess('sh', ['-c', command], options);
}

/**
 * Waits until `cond` holds, asking every 100 ms; fails the test naming `what` after `ms`. The one
 * polling wait of the tests (a bound only matters when the test is failing anyway).
 */
export async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 90_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms / 1000} s waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * `termgrade view SOURCES --port 0` through the binary: its address and the page address that
 * lets a browser in (with the printed token), once it listens. Stop it with child.kill().
 */
export async function startViewCli(
  sources: string[],
  options: { cwd?: string } = {},
): Promise<{ child: ChildProcess; url: string; open: string }> {
  const child = spawn(process.execPath, [CLI, 'view', ...sources, '--port', '0'], {
    cwd: options.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d));
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.on('exit', (code) => reject(new Error(`view exited ${code}: ${err}`)));
  });
  const { url, open } = JSON.parse(line) as { url: string; open: string };
  return { child, url, open };
}

/**
 * A whole TrialResult for tests that need one without running a trial: task `x`, agent oracle, no
 * tests, no error, a one-second run on 2026-01-01; `overrides` replace fields. `rewards`, `passed`
 * and `error` follow the `reward` and `errors` given unless given themselves.
 */
export function trialResultFixture(overrides: Partial<TrialResult> = {}): TrialResult {
  const reward = overrides.reward ?? null;
  const errors = overrides.errors ?? [];
  return {
    schemaVersion: 1,
    trialId: 't',
    task: { name: 'x', path: '/x', checksum: 'c' },
    agent: { name: 'oracle', model: null },
    attempt: 0,
    reward,
    rewards: reward === null ? {} : { reward },
    passed: reward !== null && reward >= 1,
    steps: [],
    taskVersion: null,
    dataset: null,
    collected: null,
    tests: [],
    testsSource: 'none',
    testsSourceCounts: {},
    testsSummary: { total: 0, passed: 0, failed: 0, skipped: 0, other: 0 },
    tampering: [],
    protection: 'rules',
    admission: null,
    findings: [],
    evidence: null,
    error: errors[0] ?? null,
    errors,
    exitReason: 'completed',
    turns: 1,
    tokens: null,
    costUsd: null,
    image: null,
    imageSource: null,
    imageId: null,
    engine: null,
    imageCached: null,
    phases: {},
    startedAt: '2026-01-01T00:00:00Z',
    finishedAt: '2026-01-01T00:00:01Z',
    durationMs: 1000,
    ...overrides,
  };
}
