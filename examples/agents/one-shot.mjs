// A custom agent in one file: asks the model once for a bash script that does the task, runs it,
// and stops. Load it with
//   npx termgrade run --tasks examples/tasks --agent-import-path examples/agents/one-shot.mjs \
//     --model MODEL@http://127.0.0.1:8000/v1
// termgrade gives `create` a ready model client (retries, token counts, cost) and grades the
// sandbox afterwards; the agent never sees the tests.

const SYSTEM = 'You write one bash script that completes the task in a Linux machine with no network. Reply with the script only, in a ```bash block.';

/** @type {import('termgrade').AgentPlugin} */
export default {
  name: 'one-shot',
  needsModel: true,
  create({ client }) {
    return {
      name: 'one-shot',
      model: client.config.model,
      async setup() {},
      async run({ sandbox, task, signal, usage, env, logsDir, scrub }) {
        const reply = await client.complete({ messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: task.instruction }], signal });
        usage.turns = 1;
        usage.tokens = { input: reply.usage.prompt, cached: reply.usage.cached, output: reply.usage.completion };
        usage.costUsd = reply.costUsd;
        const script = /```(?:bash|sh)?\n([\s\S]*?)```/.exec(reply.content)?.[1] ?? reply.content;
        const result = await sandbox.exec(['bash', '-c', script], { env, signal, timeoutSec: 600 });
        const { writeFile } = await import('node:fs/promises');
        // scrub() takes out the API key and env-file values: nothing secret reaches a file.
        await writeFile(`${logsDir}/one-shot.txt`, scrub(`--- script ---\n${script}\n--- exit ${result.exitCode} ---\n${result.stdout.text}${result.stderr.text}`));
        return { exitReason: 'completed', message: null };
      },
    };
  },
};
