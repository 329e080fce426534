/**
 * The agent loop's own overhead per turn: time that is neither in the model call nor in what the
 * turn asked for (terminus: the requested `duration`; bash-tool: the command's execution), with a
 * zero-latency scripted model and real containers (real tmux, real bash).
 *
 *   node dist/bench/agent-overhead.js [turns]
 *
 * Target: p50 under 50 ms per turn.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Agent, AgentContext } from '../src/agent/agent.js';
import { createBashToolAgent } from '../src/agent/bash-tool.js';
import { createTerminusAgent } from '../src/agent/terminus/terminus.js';
import { ModelClient, type CompleteOptions, type Completion } from '../src/model/client.js';
import { ModelConfigSchema } from '../src/model/config.js';
import type { ExecOptions, ExecResult, Sandbox } from '../src/sandbox/sandbox.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { median } from '../src/stats/summary.js';
import { loadTask } from '../src/task/load.js';
import { makeScrub } from '../src/util/scrub.js';
import { ScriptedModelServer } from '../test/support/scripted-model-server.js';
import { bash, turn } from '../test/support/scripts.js';

const TURNS = Number(process.argv[2] ?? 40);
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

/** Records when each model call starts and ends. */
class TimedClient extends ModelClient {
  calls: Array<{ start: number; end: number }> = [];
  override async complete(options: CompleteOptions): Promise<Completion> {
    const start = performance.now();
    try {
      return await super.complete(options);
    } finally {
      this.calls.push({ start, end: performance.now() });
    }
  }
}

/** Records the wall time of every exec (the command's own execution, for bash-tool). */
function timedSandbox(inner: Sandbox, execs: number[]): Sandbox {
  return {
    id: inner.id,
    exec: async (command: string | string[], options?: ExecOptions): Promise<ExecResult> => {
      const t = performance.now();
      try {
        return await inner.exec(command, options);
      } finally {
        execs.push(performance.now() - t);
      }
    },
    shell: () => inner.shell(),
    copyIn: (a, b, o) => inner.copyIn(a, b, o),
    putFiles: (e) => inner.putFiles(e),
    copyOut: (a, b, o) => inner.copyOut(a, b, o),
    readFile: (p, n) => inner.readFile(p, n),
    changes: () => inner.changes(),
    setNetwork: (n) => inner.setNetwork(n),
    snapshot: (o) => inner.snapshot(o),
    stop: () => inner.stop(),
    diskUsage: () => inner.diskUsage(),
    close: () => inner.close(),
  };
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};

async function measure(kind: 'terminus' | 'bash-tool'): Promise<void> {
  const script =
    kind === 'terminus'
      ? [
          ...Array.from({ length: TURNS }, (_, i) => turn([{ keystrokes: `echo turn-${i}\n`, duration: 0 }])),
          turn([], true),
          turn([], true),
        ]
      : [...Array.from({ length: TURNS }, (_, i) => bash(`echo turn-${i}`)), bash('echo TERMGRADE_TASK_COMPLETE')];
  const server = new ScriptedModelServer({ m: script });
  const baseUrl = await server.start();
  const client = new TimedClient(ModelConfigSchema.parse({ baseUrl, model: 'm' }));
  const agent: Agent =
    kind === 'terminus'
      ? createTerminusAgent({ client, maxTurns: TURNS + 5 })
      : createBashToolAgent({ client, maxTurns: TURNS + 5 });
  const task = await loadTask(path.join(ROOT, 'examples/tasks/csv-summary'));
  const provider = new DockerProvider();
  const prepared = await provider.prepare(task, { agentLayer: agent.imageLayer });
  const inner = await provider.start(task, prepared);
  const execs: number[] = [];
  const logs = await mkdtemp(path.join(tmpdir(), 'termgrade-bench-agent-'));
  try {
    const ctx: AgentContext = {
      sandbox: timedSandbox(inner, execs),
      task,
      logsDir: logs,
      env: {},
      signal: new AbortController().signal,
      scrub: makeScrub([]),
      usage: { turns: 0, tokens: null, costUsd: null },
      sessionId: 'bench',
    };
    await agent.setup(ctx);
    const outcome = await agent.run(ctx);
    if (outcome.exitReason !== 'completed')
      throw new Error(`${kind} ended with ${outcome.exitReason}: ${outcome.message}`);
    // Turn i's overhead: from the end of model call i to the start of call i+1, less the command's
    // execution (bash-tool); terminus turns here ask for duration 0.
    const overhead: number[] = [];
    const model: number[] = client.calls.map((c) => c.end - c.start);
    for (let i = 0; i < TURNS; i++) {
      const gap = client.calls[i + 1]!.start - client.calls[i]!.end;
      overhead.push(kind === 'bash-tool' ? gap - execs[i]! : gap);
    }
    console.log(
      `${kind.padEnd(10)} ${TURNS} turns: loop overhead p50 ${median(overhead).toFixed(1)} ms, p90 ${pct(overhead, 0.9).toFixed(1)} ms` +
        ` | model call (scripted, zero latency) p50 ${median(model).toFixed(1)} ms` +
        (kind === 'bash-tool' ? ` | command execution (docker exec) p50 ${median(execs).toFixed(1)} ms` : ''),
    );
  } finally {
    await inner.close();
    await server.close();
    await rm(logs, { recursive: true, force: true });
  }
}

await measure('terminus');
await measure('bash-tool');
console.log('target: loop overhead p50 < 50 ms per turn');
