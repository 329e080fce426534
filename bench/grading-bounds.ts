/**
 * What a flood of empty files costs grading (issue 32: 250,000 files took 109 s to copy with the
 * agent frozen before the scan refused them). One trial of an agent that makes N files (default
 * 250,000) and solves the task: printed, its grade and how long its agent turn and its grading took.
 * Run: npm run build && node dist/bench/grading-bounds.js [N]
 */
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { loadTask } from '../src/task/load.js';
import { runTrial } from '../src/trial/run.js';
import { tempDir, trivialTask } from '../test/helpers.js';
import { scriptAgent } from '../test/support/attack-suite.js';

const n = Number(process.argv[2] ?? 250_000);
const provider = new DockerProvider({ execVia: 'shell' });
try {
  const task = await loadTask(
    await trivialTask({ 'task.toml': '[task]\nname = "flood"\n[agent]\ntimeout_sec = 900\n' }),
  );
  const r = await runTrial({
    task,
    agent: scriptAgent(
      `mkdir -p /app/flood && cd /app/flood && seq 1 ${n} | xargs touch; echo hello > /app/out.txt`,
      900,
    ),
    provider,
    outDir: await tempDir(),
  });
  const s = (ms: number | undefined): string => `${((ms ?? 0) / 1000).toFixed(1)} s`;
  console.log(
    `${n} files: reward ${r.reward} (${r.error?.class ?? 'no error'}); agent turn ${s(r.phases.agent_run?.durationMs)}, grading ${s(r.phases.verification?.durationMs)}`,
  );
} finally {
  await provider.closeAll();
}
