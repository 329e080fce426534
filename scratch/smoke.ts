import { loadTask } from '../src/task/load.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { runTrial } from '../src/trial/run.js';
import { getAgent } from '../src/agent/registry.js';
const task = await loadTask(process.argv[2]!);
const provider = new DockerProvider();
for (const a of ['oracle', 'nop']) {
  const r = await runTrial({ task, agent: getAgent(a), provider, outDir: '/tmp/tg-smoke' });
  console.log(a, r.reward, r.error, r.testsSummary, r.testsSource, Object.fromEntries(Object.entries(r.phases).map(([k, v]) => [k, Math.round(v!.durationMs)])));
}
