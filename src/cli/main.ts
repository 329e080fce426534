#!/usr/bin/env -S node --
// `node --`: Node 20 takes an `--env-file` anywhere on its command line, even after the script, and
// exits 9 when that file is missing; after `--` the flag is left to termgrade's own --env-file.
import { Command, InvalidArgumentError, Option } from 'commander';
// Command modules are imported when their command runs: the Docker client and friends cost
// half a second of start-up that `stats` or `--help` should not pay.
import { parseBand } from './table.js';
import { EXIT } from './signals.js';
import { exitCodeOf, TermgradeError } from '../util/errors.js';

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number >= 1');
  return n;
}

function wholeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('expected a whole number >= 0');
  return n;
}

function band(value: string): [number, number] {
  try {
    return parseBand(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

function rate(value: string): number {
  const n = Number(value);
  if (!(n >= 0 && n <= 1)) throw new InvalidArgumentError('expected a rate between 0 and 1');
  return n;
}

const list = (value: string): string[] =>
  value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
const collect = (value: string, previous: string[] = []): string[] => [...previous, value];
const ENGINE_HELP =
  'a Docker engine to run sandboxes on, repeatable (a pool): unix:///path, tcp://host:port or ssh://user@host, then ,capacity=N ,name=X ,tls=DIR ,ssh-key=FILE ,label.K=V (default: the local engine)';
const GRADING_HELP =
  "how a reward is held against the tests' own reports: evidence (default: a pass they do not support is graded 0, reward_unsupported) or harbor (the reward file's number stands; recorded on each trial)";
const BUILD_NETWORK_HELP =
  "network task images are built on: default (the engine's), none, host (the host's own, its loopback services included: only if you trust every task), or a network's name (default: TERMGRADE_BUILD_NETWORK, else /etc/termgrade/engine.json, else the engine's)";

const ADMISSION_DIR_HELP =
  'folder of admission records (check writes one per task content; every command that grades reads it): default TERMGRADE_ADMISSION_DIR, else .termgrade/protection in the working directory';

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
  .option('--engine <host>', ENGINE_HELP, collect)
  .argument('<dirs...>', 'task folders, or folders of task folders')
  .option('-r, --repeat <n>', 'oracle runs per task; disagreement means flaky', positiveInt, 2)
  .option(
    '-c, --concurrency <n>',
    "tasks checked at once (default 2, or the engines' total capacity with --engine)",
    positiveInt,
  )
  .option('-o, --out <dir>', 'where trial folders, build logs and check.json go (default .termgrade/check/<time>)')
  .option('--timeout-multiplier <x>', 'multiply every task agent and verifier timeout', positiveNumber, 1)
  .option('--force-build', "build each task's Dockerfile even when it names an available prebuilt image (docker_image)")
  .option('--build-network <name>', BUILD_NETWORK_HELP)
  .option(
    '--no-verifier-toolchain',
    "do not grade verifiers that fetch their tools (Terminal-Bench 2's uvx pytest) with termgrade's offline toolchain",
  )
  .option(
    '--verifier-wheels <dir>',
    "wheels for uvx -w requirements the offline toolchain lacks (tried before Debian's package of them)",
  )
  .option(
    '--network <name>',
    'check tasks that ask for the internet online on this isolated network (the rules of run --network); others stay offline',
  )
  .option(
    '--job <name>',
    'a resumable check: every verdict recorded as it is reached; run again to go on where a killed check stopped',
  )
  .option('--jobs-dir <dir>', 'where check jobs live', '.termgrade/checks')
  .option('--admission-dir <dir>', ADMISSION_DIR_HELP)
  .option(
    '--review',
    'an LLM reviews each task against the rubric (advisory, in tasks[].review); needs --review-model and --review-base-url',
  )
  .option('--review-model <name>', 'the reviewing model')
  .option('--review-base-url <url>', 'its OpenAI-compatible endpoint')
  .option('--review-api-key-env <var>', 'environment variable holding its API key', 'OPENAI_API_KEY')
  .addOption(
    new Option(
      '--probes <level>',
      'probes for exploitable tasks: none; fast (forgeable reward, leaked solution, nondeterministic verifier, duplicates); all (also weak tests, and reward hacks played on the code the tests run)',
    )
      .choices(['none', 'fast', 'all'])
      .default('fast'),
  )
  .option('--json', 'print exactly one JSON object on stdout (progress stays on stderr)')
  .option('-q, --quiet', 'no progress output')
  .action(async (dirs: string[], opts) => {
    const { checkCommand } = await import('./check-command.js');
    process.exitCode = await checkCommand(dirs, opts);
  });

program
  .command('synth')
  .description(
    'Grow admitted task folders from seeds with a generator model: environment first, grounded in executed state, repaired part by part.',
  )
  .option('--seeds <file>', 'JSONL of seeds: one JSON object per line (free fields; "id" names it)')
  .option(
    '--exemplars <dirs...>',
    'existing task folders as seeds: a different task of the same skill each (also in --pool)',
  )
  .requiredOption('--model <config>', 'the generator model: a JSON file {baseUrl, model, apiKeyEnv, price, ...}')
  .requiredOption('-o, --out <dir>', 'where admitted task folders go; the job (resumable) lives in <dir>/.synth')
  .option('--engine <host>', ENGINE_HELP, collect)
  .option('--build-network <name>', BUILD_NETWORK_HELP)
  .option('--candidates-per-seed <n>', 'candidates made from each seed', positiveInt, 1)
  .option('--max-rounds <n>', 'repair rounds per candidate', wholeNumber, 3)
  .option('--max-tokens <n>', 'generator tokens one candidate may use, repairs included', positiveInt, 400000)
  .option('-c, --concurrency <n>', "candidates worked on at once (default the engines' capacity, or 2)", positiveInt)
  .option('--model-concurrency <n>', 'generator calls in flight at once', positiveInt, 4)
  .option('--max-malformed <n>', 'invalid replies re-asked per part before the candidate is rejected', wholeNumber, 2)
  .option('-r, --repeat <n>', "oracle runs in admission (check's --repeat)", positiveInt, 2)
  .addOption(
    new Option('--probes <level>', "admission's probes (check's --probes)")
      .choices(['none', 'fast', 'all'])
      .default('all'),
  )
  .option('--pool <dirs...>', 'existing task folders an admitted task must not duplicate')
  .option('--admission-dir <dir>', ADMISSION_DIR_HELP)
  .option('--json', 'print the funnel as one JSON object (schema: schemas/synth.schema.json)')
  .option('--jsonl', 'print each stage event as a JSON line, then {"type":"funnel","report":...}')
  .option('--candidates', 'after the funnel, one line per candidate: its seed, state, rounds, stage and why')
  .option('--no-preflight', "skip asking the generator's endpoint for its model list before anything starts")
  .option('-q, --quiet', 'no progress output')
  .action(async (opts) => {
    const { synthCommand } = await import('./synth-command.js');
    process.exitCode = await synthCommand(opts);
  });

program
  .command('run-trial')
  .description('Run one trial of an agent on a task and print its result.')
  .argument('<task>', 'task folder')
  .option(
    '-a, --agent <name>',
    'agent: oracle, nop, terminus, bash-tool, or a loaded custom agent (default oracle, or the loaded one)',
  )
  .option(
    '--agent-import-path <module>',
    'load a custom agent: a .js file or package whose default export is an agent plugin',
  )
  .option('-m, --model <name>', 'model name, for terminus and bash-tool')
  .option('--base-url <url>', 'OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1')
  .option(
    '--api-key-env <var>',
    'environment variable holding the API key (its value is never logged)',
    'OPENAI_API_KEY',
  )
  .option('--temperature <t>', 'sampling temperature', Number)
  .option('--top-p <p>', 'nucleus sampling', Number)
  .option('--max-tokens <n>', 'completion token limit per call', positiveInt)
  .option('--extra-body <json>', 'extra request body fields, as JSON (e.g. vLLM\'s {"return_token_ids": true})')
  .option('--request-timeout <s>', 'seconds per model request', positiveNumber)
  .option('--context-window <n>', 'context window in tokens (summarise before it fills)', positiveInt)
  .option('--max-turns <n>', 'turn limit', positiveInt)
  .option('--prices <file>', 'price table JSON {model: {input, cachedInput, output}} in USD per 1M tokens')
  .option('--build-network <name>', BUILD_NETWORK_HELP)
  .option('-o, --out <dir>', 'where the trial folder goes', '.termgrade/trials')
  .option('--admission-dir <dir>', ADMISSION_DIR_HELP)
  .option('--timeout-multiplier <x>', 'multiply the task agent and verifier timeouts', positiveNumber, 1)
  .addOption(new Option('--grading <policy>', GRADING_HELP).choices(['evidence', 'harbor']))
  .option('--json', 'print the trial result as JSON')
  .option(
    '--branch-at <turn>',
    'a tree: run the agent to this turn, fork its sandbox and conversation into --branches, run and grade each (bash-tool)',
    positiveInt,
  )
  .option('--branches <n>', 'how many branches --branch-at makes', positiveInt)
  .action(async (task: string, opts) => {
    const { runTrialCommand } = await import('./run-trial-command.js');
    process.exitCode = await runTrialCommand(task, opts);
  });

const JOBS_DIR = '.termgrade/jobs';

program
  .command('run')
  .description('Run a job: agent configurations x tasks x k trials, recorded in the job store; run again to resume.')
  .option('--engine <host>', ENGINE_HELP, collect)
  .argument('[jobfile]', 'job file (.toml, .yaml or .json); or use the flags below')
  .option('-j, --job <name>', 'resume this job by name (its stored spec), or name a new one')
  .option('--name <name>', 'name for a job built from flags')
  .option('-t, --tasks <paths...>', 'task folders, folders of task folders, or globs')
  .option('--task <names...>', 'only tasks whose name matches (globs allowed)')
  .option('--exclude-task <names...>', 'leave out tasks whose name matches (globs allowed)')
  .option(
    '--skip-invalid',
    'run the tasks that load and list each task folder left out with its error (default: an invalid folder the filters keep refuses the run)',
  )
  .option('--n-tasks <n>', 'after the filters, only the first N tasks by name', positiveInt)
  .option(
    '--sample <n>',
    'after the filters, N tasks drawn at random (with --seed; the same seed draws the same tasks)',
    positiveInt,
  )
  .option('--seed <s>', 'seed of --sample', positiveInt, 1)
  .option(
    '-a, --agent <name...>',
    'agent configurations: oracle, nop, terminus, bash-tool, or a loaded custom agent (repeat for several)',
  )
  .option(
    '--agent-import-path <module...>',
    'load a custom agent: a .js file or package whose default export is an agent plugin; its agent is run (with -a, by name)',
  )
  .option(
    '-m, --model <name...>',
    'models for the agents that need one, NAME or NAME@URL (its own endpoint); each model agent runs once per model',
  )
  .option('--base-url <url>', 'OpenAI-compatible endpoint for models given without @URL')
  .option('--api-key-env <var>', 'environment variable holding the API key', 'OPENAI_API_KEY')
  .option(
    '--agent-env <KEY=VALUE...>',
    "environment variables for the agents' commands (stored with the job; put secrets in --env-file)",
  )
  .option(
    '--env-file <file...>',
    'KEY=VALUE files for the agents: read at each run, never stored, values scrubbed from every record',
  )
  .option('--no-preflight', 'skip asking each model endpoint for its model list before anything starts')
  .option('--temperature <t>', 'sampling temperature', Number)
  .option('--max-turns <n>', 'turn limit per trial', positiveInt)
  .option('-k, --k <n>', 'trials per task and configuration', positiveInt)
  .option(
    '-c, --concurrency <n>',
    "trials at once; a file name instead is the job file, as Harbor's `harbor run -c job.yaml`",
    (v) => (/^[+-]?\d+$/.test(v.trim()) ? positiveInt(v) : v),
  )
  .option(
    '--config <file>',
    "a job file: termgrade's, or Harbor's job config (job.yaml / config.json), converted with a warning naming what has no equivalent",
  )
  .option('--endpoint-concurrency <n>', 'trials at once against the model endpoint', positiveInt)
  .option('--budget <seconds>', 'wall-clock budget; running trials stop and are recorded as not run', positiveNumber)
  .option('--timeout-multiplier <x>', 'multiply every agent and verifier timeout', positiveNumber)
  .addOption(new Option('--grading <policy>', GRADING_HELP).choices(['evidence', 'harbor']))
  .option('--infra-retries <n>', 'retries of a trial after an infrastructure failure', (v) => Number(v))
  .option(
    '--retry <classes>',
    'with --job: run again recorded trials that ended in these error classes (comma-separated), or "errors" for every trial without a reward; each replaced record is kept in the job\'s history',
  )
  .option('--force-build', "build each task's Dockerfile even when it names an available prebuilt image (docker_image)")
  .option('--build-network <name>', BUILD_NETWORK_HELP)
  .option(
    '--network <name>',
    'an isolated Docker network for tasks that ask for the internet (default: every trial offline)',
  )
  .option(
    '--adaptive',
    'adaptive sampling: trials in pairs, a task stops once its band decision is settled (k is the cap)',
  )
  .option('--adaptive-band <lo:hi>', 'band of the adaptive decision', band)
  .option('--adaptive-risk <p>', "what a decision that differs from k trials' costs: 1/p trials (default 0.009)", rate)
  .option(
    '--prior <job>',
    "adaptive sampling informed by an earlier measurement of the same tasks (a job folder or records), e.g. the last checkpoint's job",
  )
  .option(
    '--prior-config <label>',
    'the configuration of --prior to use (default: the one with the same label; another is used only when named)',
  )
  .option('--jobs-dir <dir>', 'where job folders live', JOBS_DIR)
  .addOption(
    new Option(
      '--format <layout>',
      "harbor: also keep the job as Harbor's job folder (config.json, result.json, a folder per trial) in --harbor-jobs-dir, each trial's folder as it is recorded; termgrade: not (a Harbor job config sets harbor)",
    ).choices(['termgrade', 'harbor']),
  )
  .option('--harbor-jobs-dir <dir>', "where Harbor's job folder goes (implies --format harbor; default jobs)")
  .option('--admission-dir <dir>', ADMISSION_DIR_HELP)
  .option('--jsonl', 'print every event as a JSON line on stdout')
  .option('-q, --quiet', 'no progress output (the summary at the end is still printed)')
  // A test hook, not for users: each trial's store write stalls this long (tests kill a run mid-write).
  .addOption(new Option('--fault-store-write-delay-ms <ms>').argParser(positiveInt).hideHelp())
  .addHelpText(
    'after',
    '\nExit codes: 0 every slot recorded; 1 some slots not run (budget); 5 the store cannot be written (disk full, read-only).',
  )
  .action(async (file: string | undefined, opts) => {
    const { runCommand } = await import('./job-commands.js');
    const { harborRunArgs } = await import('./harbor-run.js');
    process.exitCode = await runCommand(...harborRunArgs(file, opts));
  });

program
  .command('trials')
  .description("List a job's trials.")
  .requiredOption('-j, --job <name>', 'the job')
  .addOption(new Option('--status <status>', 'only trials with this status').choices(['completed', 'error', 'not_run']))
  .option('--jobs-dir <dir>', 'where job folders live', JOBS_DIR)
  .option('--json', 'JSON lines: trial_id, config, task, agent, model, attempt, status, reward, ...')
  .action(async (opts) => {
    const { trialsCommand } = await import('./records-commands.js');
    process.exitCode = await trialsCommand(opts);
  });

program
  .command('import')
  .description('Import Harbor job folders (per-trial result.json, verifier/ctrf.json) into a job.')
  .argument('<harbor-jobs-dir>', 'a Harbor jobs folder, job folder or trial folder')
  .requiredOption('-j, --job <name>', 'the job to import into')
  .option('--jobs-dir <dir>', 'where job folders live', JOBS_DIR)
  .action(async (dir: string, opts) => {
    const { importCommand } = await import('./records-commands.js');
    process.exitCode = await importCommand(dir, opts);
  });

const SOURCES = 'trial records: JSONL files (trial results or job listings) or folders holding trial folders';

program
  .command('stats')
  .description('Per configuration: pass@1 with CI, pass@k, errors, time / tokens / cost per success, near misses.')
  .argument('<sources...>', SOURCES)
  .option('--tasks', 'also list every task: trials, successes, rate, Wilson and Jeffreys intervals, band probability')
  .option('--band <lo:hi>', 'band for the per-task band probability', band, [0.25, 0.75] as [number, number])
  .option('--by-image', 'split each configuration by the image id its trials ran on (label "CONFIG @ID")')
  .option('--json', 'print one JSON object')
  .action(async (sources: string[], opts) => {
    const { statsCommand } = await import('./measure-commands.js');
    process.exitCode = await statsCommand(sources, opts);
  });

program
  .command('compare')
  .description(
    'Paired comparison of two configurations on their common tasks (paired t-test and sign-flip permutation).',
  )
  .argument('<a>', 'configuration label, as `stats` prints it (agent or agent/model)')
  .argument('<b>', 'the other configuration')
  .argument('<sources...>', SOURCES)
  .option('--families <file>', 'lines "task family": cluster tasks of one family before testing')
  .option('--permutations <n>', 'Monte Carlo sign flips when there are more than 16 tasks', positiveInt, 20000)
  .option('--json', 'print one JSON object')
  .action(async (a: string, b: string, sources: string[], opts) => {
    const { compareCommand } = await import('./measure-commands.js');
    process.exitCode = await compareCommand(a, b, sources, opts);
  });

program
  .command('select')
  .description('Select training tasks: in band, then the N closest to the target; optionally a bimodal validation set.')
  .argument('<sources...>', SOURCES)
  .requiredOption('-m, --model <config>', 'the configuration to select for')
  .option('--band <lo:hi>', 'success-rate band', band, [0.25, 0.75] as [number, number])
  .option('-n, --n <n>', 'keep the N tasks closest to the target (default: all in band)', positiveInt)
  .option('--target <p>', 'target success rate', rate, 0.5)
  .option('--exclude <file>', 'held-out task names, one per line (repeatable)', collect)
  .option('--min-trials <n>', 'tasks with fewer graded trials are left out', positiveInt, 4)
  .option(
    '--validation <n>',
    'also pick N validation tasks per validation target, disjoint from the selection',
    positiveInt,
  )
  .option(
    '--validation-targets <list>',
    'comma-separated target rates for the validation set',
    (v) => list(v).map(rate),
    [0.25, 0.75],
  )
  .option('-o, --out <dir>', 'write selected.txt, manifest.json (and validation.txt) here')
  .option('--json', 'print the manifest as one JSON object')
  .action(async (sources: string[], opts) => {
    const { selectCommand } = await import('./measure-commands.js');
    process.exitCode = await selectCommand(sources, opts);
  });

program
  .command('overlap')
  .description("Jaccard matrix of several configurations' band sets, with each one's same-model ceiling.")
  .argument('<sources...>', SOURCES)
  .option('--models <list>', 'comma-separated configurations (default: all)', list)
  .option('--band <lo:hi>', 'success-rate band', band, [0.25, 0.75] as [number, number])
  .option('--min-trials <n>', 'tasks with fewer graded trials are left out', positiveInt, 4)
  .option('--json', 'print one JSON object')
  .action(async (sources: string[], opts) => {
    const { overlapCommand } = await import('./measure-commands.js');
    process.exitCode = await overlapCommand(sources, opts);
  });

const exporter = program.command('export').description('Write trials or a selection out as datasets for training.');
exporter
  .command('trials')
  .description(
    'Trials as a Hugging Face-style dataset folder: data/trials.parquet (one row per trial: record, tests, messages, tools, ATIF trajectory) and a dataset card.',
  )
  .argument('<sources...>', 'job folders or folders of trial folders')
  .requiredOption('-o, --out <dir>', 'the dataset folder')
  .option('--jsonl', 'write data/trials.jsonl instead of Parquet')
  .addOption(
    new Option(
      '--format <format>',
      "parquet (default), jsonl, or harbor-job: each job folder as Harbor's job folder OUT/<job>/ (config.json, result.json, a trial folder per trial) for harbor view and Harbor readers",
    ).choices(['parquet', 'jsonl', 'harbor-job']),
  )
  .action(async (sources: string[], opts) => {
    const { exportTrialsCommand } = await import('./export-command.js');
    process.exitCode = await exportTrialsCommand(sources, opts);
  });
exporter
  .command('tasks')
  .description(
    "A `select --out` folder as training data: Harbor task folders carrying their measured rate, and verl's RL rows (rl/train.parquet, rl/validation.parquet).",
  )
  .requiredOption('--selection <dir>', 'the `select --out` folder')
  .requiredOption('-t, --tasks <paths...>', 'task folders, or folders of task folders, holding the selected tasks')
  .requiredOption('-o, --out <dir>', 'where train/, validation/ and rl/ go')
  .option(
    '--agent-name <name>',
    'the agent loop verl should use for these rows (its agent_name column)',
    'termgrade_agent',
  )
  .action(async (opts) => {
    const { exportTasksCommand } = await import('./export-command.js');
    process.exitCode = await exportTasksCommand(opts);
  });

program
  .command('convert')
  .description(
    'Convert Terminal-Bench 1 task folders (task.yaml, solution.sh or solution.yaml, run-tests.sh, tests/) into the Harbor layout; what cannot be carried over is named.',
  )
  .argument('<src>', 'a TB1 task folder, or a folder of them')
  .requiredOption('-o, --out <dir>', 'where the converted task folders go')
  .action(async (src: string, opts) => {
    const { convertCommand } = await import('./convert-command.js');
    process.exitCode = await convertCommand(src, opts);
  });

program
  .command('drift')
  .description(
    "Per task, the success rate over the recent rollouts a server graded, by the trainer's policy label, and which tasks left the band.",
  )
  .argument('<source>', 'a `serve --record` name, a `serve --data-dir` folder, or its grades.jsonl')
  .option('--selection <dir>', 'a `select --out` folder: report on its selected tasks')
  .option('--band <lo:hi>', 'the band tasks were selected for', band, [0.25, 0.75])
  .option('--recent <n>', 'graded rollouts per task and policy to look at', positiveInt, 32)
  .option('--min-trials <n>', 'fewer graded rollouts than this: too few to judge', positiveInt, 8)
  .option('--json', 'one JSON object')
  .action(async (source: string, opts) => {
    const { driftCommand } = await import('./drift-command.js');
    process.exitCode = await driftCommand(source, opts);
  });

program
  .command('serve')
  .description(
    'Serve tasks to RL trainers over HTTP: sessions (create, exec, verify) and whole episodes against a model endpoint.',
  )
  .option('--engine <host>', ENGINE_HELP, collect)
  .requiredOption('-t, --tasks <paths...>', 'task folders, or folders of task folders')
  .option(
    '--selection <dir>',
    'a `select --out` folder: serve only its training and validation tasks, with their rates',
  )
  .option('--host <host>', 'address to bind (anything but loopback needs --token-env)', '127.0.0.1')
  .option('--port <n>', 'port (0: any free one)', (v) => Number(v), 8080)
  .option(
    '--token-env <var>',
    'environment variable holding the bearer token clients must send (default: a token generated and printed)',
  )
  .option(
    '--allowed-host <name>',
    'a host name clients may reach the server by besides the bound address (a proxy, a DNS name); repeatable',
    collect,
  )
  .option(
    '--model <name@url>',
    'a model episodes may call, and the OpenAI-compatible endpoint serving it (repeatable); clients pick by name',
    collect,
  )
  .option(
    '--model-config <file>',
    'models episodes may call, each with its endpoint and key variable (TOML [[models]] or JSON {"models": [...]})',
  )
  .option(
    '--api-key-env <var>',
    "environment variable holding the key sent to --model endpoints (never a client's choice)",
    'OPENAI_API_KEY',
  )
  .option(
    '--request-timeout <s>',
    'seconds per model request of an episode (clients may only lower it)',
    positiveNumber,
    600,
  )
  .option(
    '--model-retries <n>',
    'retries of a failed model request of an episode (clients may only lower it)',
    wholeNumber,
    6,
  )
  .option('--build-network <name>', BUILD_NETWORK_HELP)
  .option('--admission-dir <dir>', ADMISSION_DIR_HELP)
  .addOption(new Option('--grading <policy>', GRADING_HELP).choices(['evidence', 'harbor']))
  .option(
    '--timeout-multiplier <x>',
    "multiply every task's verifier timeout (and an episode's agent timeout)",
    positiveNumber,
    1,
  )
  .option('--max-sessions <n>', 'sandboxes alive at once', positiveInt, 32)
  .option('--idle-ttl <seconds>', 'close a session unused this long', positiveNumber, 600)
  .option(
    '--warm <n>',
    'started, never-used sandboxes kept ready for the tasks clients ask for (counted in --max-sessions; each serves one session)',
    wholeNumber,
    0,
  )
  .option('--record <name>', "keep this server's grades under .termgrade/serve/NAME (for `termgrade drift NAME`)")
  .option(
    '--data-dir <dir>',
    'verifier logs, episode folders and grades.jsonl (default .termgrade/serve, or .termgrade/serve/NAME with --record)',
  )
  .option(
    '--agent-import-path <module...>',
    'custom agents episodes may name (a .js file or package whose default export is an agent plugin)',
  )
  .option('--band <lo:hi>', "the live curriculum's band of success rates (default 0.25:0.75; LO,HI too)")
  .option('--explore <share>', 'share of "auto" picks given to the task served longest ago (0..1, default 0.1)')
  .option(
    '--forget <factor>',
    'each new outcome of a task multiplies its earlier evidence by this (0..1], 1: no forgetting; default 0.95)',
  )
  .option('--prior-weight <trials>', "the selection's measurement counts as at most this many trials (default 8)")
  .addHelpText(
    'after',
    '\nPrints one JSON line {"url", "tasks", "token"?} on stdout once listening ("token" when it was generated). Stops on SIGINT / SIGTERM, removing every sandbox.',
  )
  .action(async (opts) => {
    const { serveCommand } = await import('./serve-command.js');
    process.exitCode = await serveCommand(opts);
  });

program
  .command('cleanup')
  .description('Remove containers left by termgrade runs that were killed.')
  .option('--engine <host>', ENGINE_HELP, collect)
  .option('--all', 'remove every termgrade container, even those of live runs')
  .action(async (opts) => {
    const { cleanupCommand } = await import('./cleanup-command.js');
    process.exitCode = await cleanupCommand(opts);
  });

program
  .command('selfcheck')
  .description(
    "Run the sandbox contract's checks (exec, files, timeouts, network isolation, snapshot and verifier isolation, cleanup, attacks graded 0) against a backend; one line per check, exit 1 on any failure.",
  )
  .option('--engine <host>', ENGINE_HELP, collect)
  .option('--backend <name>', 'a backend by its registered name (default: docker, or engines with --engine)')
  .option(
    '--backend-module <module>',
    'a backend from outside termgrade: a module (path or package) whose default export is a Backend; checked unless --backend names another',
  )
  .option(
    '--image <image>',
    "the image the checks' task builds FROM (needs sh, coreutils, bash)",
    'debian:bookworm-slim',
  )
  .option('--only <name...>', 'only these checks')
  .option('--json', 'one JSON object: {provider, ok, results: [...]}')
  .action(async (opts) => {
    const { selfcheckCommand } = await import('./selfcheck-command.js');
    process.exitCode = await selfcheckCommand(opts);
  });

program
  .command('report')
  .description(
    'One self-contained HTML page (plus report.json) with every figure for your trials: pass@1/pass@k, paired comparisons, rate histograms, cost, overlap, check yield, selection, trajectory behaviour.',
  )
  .argument('<sources...>', SOURCES)
  .requiredOption('-o, --out <dir>', 'where index.html and report.json go')
  .option('--band <lo:hi>', 'the selection band', band, [0.25, 0.75] as [number, number])
  .option('--min-trials <n>', 'band sets (overlap) leave out tasks with fewer graded trials', positiveInt, 4)
  .option('--check <file>', 'a check output (check.json) for the yield and rejection reasons')
  .option('--select <dir>', 'a selection (select --out folder, or its manifest.json)')
  .option('--synth <dir>', 'a synth job (synth --out folder): its funnel beside the check yield')
  .action(async (sources: string[], opts) => {
    const { reportCommand } = await import('./report-command.js');
    process.exitCode = await reportCommand(sources, opts);
  });

program
  .command('view')
  .description(
    'A local web application over job stores, check outputs and trial folders: trial table with filters, trial pages with the whole transcript, side by side, live.',
  )
  .argument(
    '[sources...]',
    'job folders, check output folders or folders of trial folders (default: every job in --jobs-dir)',
  )
  .option('--host <host>', 'address to bind (anything but loopback needs --token-env)', '127.0.0.1')
  .option('--port <port>', 'port (0: any free one)', (v) => Number(v), 8421)
  .option(
    '--token-env <var>',
    'environment variable holding the access token (default: a token generated and printed in the address to open)',
  )
  .option(
    '--allowed-host <name>',
    'a host name the viewer may be reached by besides the bound address (a proxy, a DNS name); repeatable',
    collect,
  )
  .option('--jobs-dir <dir>', 'where job folders live', JOBS_DIR)
  .action(async (sources: string[], opts) => {
    const { viewCommand } = await import('./view-command.js');
    process.exitCode = await viewCommand(sources, opts);
  });

program
  .command('engines')
  .description(
    'Each Docker engine: whether it answers, capacity, termgrade sandboxes on it (and leftovers of dead runs), images.',
  )
  .option('--engine <host>', ENGINE_HELP, collect)
  .option('--json', 'one JSON object: {engines: [...]}')
  .action(async (opts) => {
    const { enginesCommand } = await import('./engines-command.js');
    process.exitCode = await enginesCommand(opts);
  });

program
  .command('schema')
  .description(
    'Print the JSON Schema of a machine-readable output (check, trial-result, job-event, trial-row, stats, compare, select, overlap, drift, engines, job-spec), or write them all.',
  )
  .argument('[name]', 'which output; without it, the list')
  .option('-o, --out <dir>', 'write every schema as <name>.schema.json into this folder')
  .action(async (name: string | undefined, opts: { out?: string }) => {
    const { schemaCommand } = await import('./schema-command.js');
    process.exitCode = await schemaCommand(name, opts);
  });

// `termgrade stats ... | head`: a reader that goes away is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

try {
  await program.parseAsync();
} catch (err) {
  if (err instanceof TermgradeError) {
    process.stderr.write(`termgrade: ${err.message}\n`);
    process.exit(exitCodeOf(err.code));
  }
  // One line for the user; the whole trace in a file, for the bug report.
  const { writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const traceFile = (await import('node:path')).join(
    tmpdir(),
    `termgrade-crash-${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}.log`,
  );
  const message = err instanceof Error ? err.message.split('\n')[0] : String(err);
  try {
    writeFileSync(
      traceFile,
      `termgrade ${process.argv.slice(2).join(' ')}\n${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.stderr.write(`termgrade: internal error: ${message} (full trace in ${traceFile}; please report it)\n`);
  } catch {
    // The trace file cannot be written (a full or read-only disk): the whole trace goes to stderr instead.
    process.stderr.write(
      `termgrade: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
  }
  process.exit(EXIT.internal);
}
