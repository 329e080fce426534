#!/usr/bin/env node
import { Command, InvalidArgumentError, Option } from 'commander';
import { checkCommand } from './check-command.js';
import { cleanupCommand } from './cleanup-command.js';
import { runTrialCommand } from './run-trial-command.js';
import { EXIT } from './signals.js';
import { TermgradeError } from '../util/errors.js';

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number >= 1');
  return n;
}

export function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a number > 0');
  return n;
}

const program = new Command()
  .name('termgrade')
  .description('Check terminal tasks, run agents on them in sandboxes, and grade the trials.')
  .version('0.1.0')
  .showHelpAfterError()
  .addHelpText(
    'after',
    `\nExit codes: ${EXIT.ok} success, ${EXIT.rejected} some task rejected or trial failed, ${EXIT.usage} bad usage or input,\n` +
      `${EXIT.engine} no Docker engine, ${EXIT.internal} internal error, ${EXIT.sigint} interrupted (SIGINT), ${EXIT.sigterm} terminated (SIGTERM).`,
  )
  // Set before the subcommands are added so they inherit it: usage errors exit 2, help exits 0.
  .exitOverride((err) => {
    process.exit(err.exitCode === 0 ? EXIT.ok : EXIT.usage);
  });

program
  .command('check')
  .description('Admit or reject candidate tasks: build, oracle passes offline, nop fails, stable on repeat.')
  .argument('<dirs...>', 'task folders, or folders of task folders')
  .option('-r, --repeat <n>', 'oracle runs per task; disagreement means flaky', positiveInt, 2)
  .option('-c, --concurrency <n>', 'tasks checked at once', positiveInt, 2)
  .option('-o, --out <dir>', 'where trial folders, build logs and check.json go (default .termgrade/check/<time>)')
  .option('--timeout-multiplier <x>', 'multiply every task agent and verifier timeout', positiveNumber, 1)
  .option('--json', 'print exactly one JSON object on stdout (progress stays on stderr)')
  .option('-q, --quiet', 'no progress output')
  .action(async (dirs: string[], opts) => {
    process.exitCode = await checkCommand(dirs, opts);
  });

program
  .command('run-trial')
  .description('Run one trial of an agent on a task and print its result.')
  .argument('<task>', 'task folder')
  .addOption(new Option('-a, --agent <name>', 'agent').choices(['oracle', 'nop']).default('oracle'))
  .option('-o, --out <dir>', 'where the trial folder goes', '.termgrade/trials')
  .option('--timeout-multiplier <x>', 'multiply the task agent and verifier timeouts', positiveNumber, 1)
  .option('--json', 'print the trial result as JSON')
  .action(async (task: string, opts) => {
    process.exitCode = await runTrialCommand(task, opts);
  });

program
  .command('cleanup')
  .description('Remove containers left by termgrade runs that were killed.')
  .option('--all', 'remove every termgrade container, even those of live runs')
  .action(async (opts) => {
    process.exitCode = await cleanupCommand(opts);
  });

try {
  await program.parseAsync();
} catch (err) {
  if (err instanceof TermgradeError) {
    process.stderr.write(`termgrade: ${err.message}\n`);
    process.exit(err.code === 'engine_unavailable' ? EXIT.engine : EXIT.usage);
  }
  process.stderr.write(`termgrade: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(EXIT.internal);
}
