import path from 'node:path';
import type { AgentConfigInput, JobSpecInput } from '../job/spec.js';
import { knownAgents } from '../agent/registry.js';
import { TermgradeError } from '../util/errors.js';
import { nearestName } from '../util/nearest.js';

/**
 * Harbor's job config (`harbor run -c job.yaml`, Harbor's JobConfig) read into termgrade's job
 * spec. Pure: the caller reads the file, loads agent modules and prints the warnings. Every key
 * Harbor defines is either carried over, or named in `ignored` with the reason; a key that would
 * change which trials run but cannot be honoured (a registry dataset, a Python agent) is an error.
 */

/** Keys only a Harbor job config has at its top level (termgrade's spec has none of them). */
const HARBOR_TOP_KEYS = new Set([
  'job_name',
  'jobs_dir',
  'n_attempts',
  'timeout_multiplier',
  'agent_timeout_multiplier',
  'verifier_timeout_multiplier',
  'agent_setup_timeout_multiplier',
  'environment_build_timeout_multiplier',
  'n_concurrent_trials',
  'orchestrator',
  'datasets',
  'environment',
  'verifier',
  'metrics',
  'retry',
  'quiet',
  'debug',
  'install_only',
  'artifacts',
  'extra_instruction_paths',
  'plugins',
  'search',
]);

type Raw = Record<string, unknown>;
const isObject = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A Harbor job config, told by its keys: any key only Harbor has at the top, a list of `tasks`
 * (termgrade's is an object), or agents written as Harbor writes them (`name` / `model_name`).
 */
export function isHarborJobConfig(raw: unknown): boolean {
  if (!isObject(raw)) return false;
  if (Object.keys(raw).some((k) => HARBOR_TOP_KEYS.has(k))) return true;
  if (Array.isArray(raw.tasks)) return true;
  return (
    Array.isArray(raw.agents) &&
    raw.agents.some((a) => isObject(a) && !('agent' in a) && ('name' in a || 'model_name' in a || 'import_path' in a))
  );
}

/** A Harbor key that termgrade does not carry over, and why. */
export interface IgnoredField {
  field: string;
  why: string;
}

export interface HarborConversion {
  /** The job; Harbor's `jobs_dir` (resolved against the working directory, as Harbor does) is its `harborJobsDir`. */
  spec: JobSpecInput;
  ignored: IgnoredField[];
  /** Agents given as a JavaScript module (`import_path`) whose name the caller learns by loading it. */
  modules: Array<{ index: number; importPath: string }>;
}

/** Harbor agents termgrade runs, by Harbor's name; what each becomes and what differs. */
const AGENTS: Record<string, { agent: string; note?: string }> = {
  oracle: { agent: 'oracle' },
  nop: { agent: 'nop' },
  'terminus-2': {
    agent: 'terminus',
    note: "runs as termgrade's terminus: the same keystroke protocol (JSON turns into tmux), termgrade's own prompts",
  },
  terminus: {
    agent: 'terminus',
    note: "runs as termgrade's terminus: the same keystroke protocol (JSON turns into tmux), termgrade's own prompts",
  },
};

/** LiteLLM's provider prefixes for OpenAI-compatible endpoints: stripped, as LiteLLM strips them before the request. */
const OPENAI_COMPATIBLE_PREFIXES = [
  'openai/',
  'hosted_vllm/',
  'vllm/',
  'openrouter/',
  'together_ai/',
  'deepseek/',
  'litellm_proxy/',
];
const OPENAI_BASE_URL = 'https://api.openai.com/v1';
/** Harbor's default retry.exclude_exceptions: outcomes, not failures, which termgrade never retries either. */
const HARBOR_NOT_RETRIED = [
  'AgentTimeoutError',
  'VerifierTimeoutError',
  'RewardFileNotFoundError',
  'RewardFileEmptyError',
  'VerifierOutputParseError',
  'ApiUsageLimitError',
];
const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH/i;

/** A Harbor value that says nothing beyond Harbor's default: leaving it out drops nothing. */
function isDefault(v: unknown, dflt: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (isObject(v)) return Object.keys(v).length === 0;
  return v === dflt;
}

class Collector {
  readonly ignored: IgnoredField[] = [];
  constructor(readonly where: string) {}
  ignore(field: string, value: unknown, why: string, dflt?: unknown): void {
    if (!isDefault(value, dflt)) this.ignored.push({ field, why });
  }
  fail(field: string, problem: string): never {
    throw new TermgradeError('bad_input', `${this.where}: ${field}: ${problem}`);
  }
  /** Keys of an object that are not among those read: each named, none dropped silently. */
  rest(prefix: string, obj: Raw, read: string[]): void {
    for (const k of Object.keys(obj))
      if (!read.includes(k)) {
        // A misspelt key (n_attempt) would otherwise change nothing, silently: name the nearest one.
        const near = nearestName(k, read);
        this.ignored.push({
          field: `${prefix}${k}`,
          why: `not a key of Harbor's job config that termgrade knows${near ? `; did you mean ${prefix}${near}?` : ''}; ignored`,
        });
      }
  }
}

const num = (
  c: Collector,
  field: string,
  v: unknown,
  check: (n: number) => boolean,
  what: string,
): number | undefined => {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !check(v)) c.fail(field, `expected ${what}, got ${JSON.stringify(v)}`);
  return v;
};
const strings = (c: Collector, field: string, v: unknown): string[] => {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((s) => typeof s !== 'string'))
    c.fail(field, 'expected a list of names (globs allowed)');
  return v as string[];
};

/** Which agent an entry runs: a JavaScript module (import_path), or a Harbor or termgrade agent by name. */
function resolveAgent(
  c: Collector,
  raw: Raw,
  at: string,
  i: number,
  modules: HarborConversion['modules'],
): { agent: string; importPath: string | undefined } {
  const name = typeof raw.name === 'string' ? raw.name : undefined;
  const importPath = typeof raw.import_path === 'string' ? raw.import_path : undefined;
  let agent: string;
  if (importPath) {
    // Harbor's import_path is a Python class ("pkg.module:Agent"); termgrade loads JavaScript agent modules.
    if (!/\.(m?js|cjs)$/.test(importPath))
      c.fail(
        `${at}.import_path`,
        `"${importPath}" is a Python agent class, which termgrade cannot run; write the agent as a termgrade agent module (a .js file whose default export is an agent plugin) and give its path here`,
      );
    modules.push({ index: i, importPath });
    agent = name ?? '(from module)';
  } else {
    // Harbor's names first; a termgrade agent's own name (bash-tool, a loaded module's) runs as itself.
    const known = AGENTS[name ?? 'oracle'] ?? (name && knownAgents().includes(name) ? { agent: name } : undefined);
    if (!known)
      c.fail(
        `${at}.name`,
        `Harbor agent "${name}" has no termgrade equivalent; termgrade runs oracle, nop, terminus-2 (as terminus), its own agents (${knownAgents().join(', ')}), or an agent module given by import_path (.js)`,
      );
    agent = known.agent;
    if (known.note) c.ignored.push({ field: `${at}.name`, why: `"${name}" ${known.note}` });
  }
  return { agent, importPath };
}

/** Harbor's model_name (a LiteLLM name) and endpoint as termgrade's OpenAI-compatible model. */
function convertModel(
  c: Collector,
  at: string,
  modelName: string,
  kwargs: Raw,
): NonNullable<AgentConfigInput['model']> {
  const prefix = OPENAI_COMPATIBLE_PREFIXES.find((p) => modelName.startsWith(p));
  const apiBase =
    typeof kwargs.api_base === 'string'
      ? kwargs.api_base
      : typeof kwargs.base_url === 'string'
        ? kwargs.base_url
        : undefined;
  const baseUrl = apiBase ?? (modelName.startsWith('openai/') ? OPENAI_BASE_URL : undefined);
  if (!baseUrl)
    c.fail(
      `${at}.model_name`,
      `"${modelName}": termgrade talks to OpenAI-compatible endpoints; give the endpoint as ${at}.kwargs.api_base (e.g. http://127.0.0.1:8000/v1)`,
    );
  const temperature = num(c, `${at}.kwargs.temperature`, kwargs.temperature, (n) => n >= 0, 'a number >= 0');
  return {
    baseUrl,
    model: prefix ? modelName.slice(prefix.length) : modelName,
    ...(temperature !== undefined ? { temperature } : {}),
  };
}

/** The agent's variables that may be stored with the job; secrets and templates are named in `ignored`. */
function convertAgentEnv(c: Collector, at: string, raw: Raw): Record<string, string> {
  const env = raw.env ?? {};
  if (!isObject(env)) c.fail(`${at}.env`, 'expected a mapping of variable names to values');
  const kept: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    // Values are stored with the job: a secret (or Harbor's ${VAR} template of one) goes in an env file.
    if (SECRET_NAME.test(k) || (typeof v === 'string' && /\$\{[^}]+\}/.test(v)))
      c.ignored.push({
        field: `${at}.env.${k}`,
        why: 'a secret or a ${VAR} template: not stored with the job; put KEY=VALUE in a file and give it with --env-file',
      });
    else kept[k] = String(v);
  }
  return kept;
}

/** Per-agent Harbor keys termgrade has no equivalent for. */
function ignoreAgentKeys(c: Collector, at: string, raw: Raw): void {
  c.ignore(
    `${at}.override_timeout_sec`,
    raw.override_timeout_sec,
    'termgrade takes the agent timeout from task.toml, scaled by timeout_multiplier / agent_timeout_multiplier for the whole job',
  );
  c.ignore(`${at}.max_timeout_sec`, raw.max_timeout_sec, 'no per-agent cap on the agent timeout in termgrade');
  c.ignore(
    `${at}.override_setup_timeout_sec`,
    raw.override_setup_timeout_sec,
    'agent setup time is job-wide in termgrade (agent_setup_timeout_multiplier)',
  );
  c.ignore(`${at}.skills`, raw.skills, 'termgrade agents take no skills folders');
  c.ignore(`${at}.mcp_servers`, raw.mcp_servers, 'termgrade agents use no MCP servers');
  c.ignore(
    `${at}.concurrency_group`,
    raw.concurrency_group,
    'per-agent n_concurrent is kept; shared groups have no equivalent',
  );
}

function convertAgent(c: Collector, raw: unknown, i: number, modules: HarborConversion['modules']): AgentConfigInput {
  const at = `agents[${i}]`;
  if (!isObject(raw)) c.fail(at, 'expected an object with name, model_name, kwargs');
  c.rest(`${at}.`, raw, [
    'name',
    'import_path',
    'model_name',
    'kwargs',
    'env',
    'override_timeout_sec',
    'override_setup_timeout_sec',
    'max_timeout_sec',
    'skills',
    'mcp_servers',
    'n_concurrent',
    'concurrency_group',
  ]);
  const { agent, importPath } = resolveAgent(c, raw, at, i, modules);
  const kwargs = raw.kwargs === undefined || raw.kwargs === null ? {} : raw.kwargs;
  if (!isObject(kwargs)) c.fail(`${at}.kwargs`, 'expected a mapping');
  const out: AgentConfigInput = { agent, ...(importPath ? { importPath } : {}) };
  const modelName = typeof raw.model_name === 'string' ? raw.model_name : undefined;
  if (modelName) out.model = convertModel(c, at, modelName, kwargs);
  const maxTurns = num(
    c,
    `${at}.kwargs.max_turns`,
    kwargs.max_turns ?? kwargs.max_episodes,
    (n) => Number.isInteger(n) && n > 0,
    'a positive integer',
  );
  if (maxTurns !== undefined) out.maxTurns = maxTurns;
  for (const k of Object.keys(kwargs)) {
    if (['api_base', 'base_url', 'temperature', 'max_turns', 'max_episodes'].includes(k)) continue;
    c.ignored.push({
      field: `${at}.kwargs.${k}`,
      why: "an argument of Harbor's agent class; termgrade's agents take none",
    });
  }
  const kept = convertAgentEnv(c, at, raw);
  if (Object.keys(kept).length) out.env = kept;
  const n = num(c, `${at}.n_concurrent`, raw.n_concurrent, (x) => Number.isInteger(x) && x > 0, 'a positive integer');
  if (n !== undefined) out.concurrency = n;
  ignoreAgentKeys(c, at, raw);
  return out;
}

interface TaskSource {
  paths: string[];
  include: string[];
  exclude: string[];
  limit?: number;
}

function convertDatasets(c: Collector, raw: Raw, cwd: string): TaskSource {
  const datasets = raw.datasets ?? [];
  const tasks = raw.tasks ?? [];
  if (!Array.isArray(datasets)) c.fail('datasets', 'expected a list');
  if (!Array.isArray(tasks)) c.fail('tasks', 'expected a list');
  const filters: Array<{ include: string[]; exclude: string[]; limit?: number }> = [];
  const paths: string[] = [];
  datasets.forEach((d, i) => {
    const at = `datasets[${i}]`;
    if (!isObject(d)) c.fail(at, 'expected an object with path (or name and version)');
    c.rest(`${at}.`, d, [
      'path',
      'name',
      'version',
      'ref',
      'registry_url',
      'registry_path',
      'registry',
      'repo',
      'overwrite',
      'download_dir',
      'task_names',
      'exclude_task_names',
      'n_tasks',
    ]);
    if (typeof d.path !== 'string' || d.repo !== undefined) {
      const id =
        typeof d.name === 'string'
          ? `${d.name}${d.version ? `@${String(d.version)}` : ''}`
          : JSON.stringify(d.repo ?? d);
      c.fail(
        at,
        `dataset ${id} comes from a registry or repository, which termgrade does not download; fetch it (e.g. harbor datasets download ${id}) and give its folder as ${at}.path`,
      );
    }
    paths.push(path.resolve(cwd, d.path));
    const limit = num(c, `${at}.n_tasks`, d.n_tasks, (n) => Number.isInteger(n) && n > 0, 'a positive integer');
    filters.push({
      include: strings(c, `${at}.task_names`, d.task_names),
      exclude: strings(c, `${at}.exclude_task_names`, d.exclude_task_names),
      ...(limit !== undefined ? { limit } : {}),
    });
    for (const k of ['version', 'ref', 'registry_url', 'registry_path', 'registry', 'name'])
      c.ignore(`${at}.${k}`, d[k], 'a local dataset (path) is read as it is; registry fields do not apply');
    c.ignore(`${at}.overwrite`, d.overwrite, 'nothing is downloaded, so nothing is overwritten', false);
    c.ignore(`${at}.download_dir`, d.download_dir, 'nothing is downloaded');
  });
  const named: string[] = [];
  tasks.forEach((t, i) => {
    const at = `tasks[${i}]`;
    if (!isObject(t)) c.fail(at, 'expected an object with path');
    c.rest(`${at}.`, t, ['path', 'git_url', 'git_commit_id', 'name', 'ref', 'overwrite', 'download_dir', 'source']);
    if (typeof t.path !== 'string' || t.git_url || t.name)
      c.fail(
        at,
        'a task from git or a package registry is not downloaded by termgrade; check it out and give its folder as path',
      );
    paths.push(path.resolve(cwd, t.path));
    named.push(path.basename(t.path));
    c.ignore(`${at}.overwrite`, t.overwrite, 'nothing is downloaded', false);
    c.ignore(`${at}.download_dir`, t.download_dir, 'nothing is downloaded');
    c.ignore(`${at}.source`, t.source, 'trials are grouped by configuration, not by source');
  });
  if (!paths.length) c.fail('datasets', 'no task source: give datasets (with path) or tasks');
  // termgrade's job has one filter for all its task paths: datasets with different filters cannot share it.
  const first = filters[0] ?? { include: [], exclude: [] };
  const same = filters.every((f) => JSON.stringify(f) === JSON.stringify(first));
  if (!same)
    c.fail(
      'datasets',
      'the datasets have different task_names / exclude_task_names / n_tasks; termgrade applies one filter to every task path, so run them as separate jobs',
    );
  if (first.limit !== undefined && paths.length > 1)
    c.fail(
      'datasets[0].n_tasks',
      'n_tasks applies per dataset in Harbor and to the whole job in termgrade; with several task sources run them as separate jobs',
    );
  // An explicitly listed task stays in when the datasets' filter names others (Harbor filters datasets only).
  const include = first.include.length ? [...first.include, ...named] : [];
  return { paths, include, exclude: first.exclude, ...(first.limit !== undefined ? { limit: first.limit } : {}) };
}

/** The job's attempts, concurrency and timeout multipliers (each defaulting to timeout_multiplier). */
function convertCounts(c: Collector, raw: Raw, orch: Raw) {
  const k = num(c, 'n_attempts', raw.n_attempts, (n) => Number.isInteger(n) && n > 0, 'a positive integer');
  const concurrency = num(
    c,
    'n_concurrent_trials',
    raw.n_concurrent_trials ?? orch.n_concurrent_trials,
    (n) => Number.isInteger(n) && n > 0,
    'a positive integer',
  );
  const all = num(c, 'timeout_multiplier', raw.timeout_multiplier, (n) => n > 0, 'a number > 0') ?? 1;
  const agentX = num(c, 'agent_timeout_multiplier', raw.agent_timeout_multiplier, (n) => n > 0, 'a number > 0') ?? all;
  const verifierX =
    num(c, 'verifier_timeout_multiplier', raw.verifier_timeout_multiplier, (n) => n > 0, 'a number > 0') ?? all;
  const setupX =
    num(c, 'agent_setup_timeout_multiplier', raw.agent_setup_timeout_multiplier, (n) => n > 0, 'a number > 0') ?? all;
  return { k, concurrency, agentX, verifierX, setupX };
}

function convertMaxRetries(c: Collector, retry: Raw): number | undefined {
  const maxRetries = num(
    c,
    'retry.max_retries',
    retry.max_retries,
    (n) => Number.isInteger(n) && n >= 0,
    'an integer >= 0',
  );
  if (maxRetries)
    c.ignored.push({
      field: 'retry.max_retries',
      why: `kept as infraRetries ${maxRetries}: termgrade retries infrastructure failures only; an agent's or verifier's outcome is recorded, never run again`,
    });
  return maxRetries;
}

/** The environment and verifier sections, checked; a run without verification or install-only is an error. */
function readEnvironmentAndVerifier(c: Collector, raw: Raw): { env: Raw; verifier: Raw } {
  const env = raw.environment ?? {};
  if (!isObject(env)) c.fail('environment', 'expected a mapping');
  c.rest('environment.', env, [
    'type',
    'import_path',
    'force_build',
    'delete',
    'override_cpus',
    'override_memory_mb',
    'override_storage_mb',
    'override_gpus',
    'suppress_override_warnings',
    'mounts',
    'mounts_json',
    'extra_docker_compose',
    'env',
    'kwargs',
  ]);
  const verifier = raw.verifier ?? {};
  if (!isObject(verifier)) c.fail('verifier', 'expected a mapping');
  c.rest('verifier.', verifier, ['override_timeout_sec', 'max_timeout_sec', 'env', 'import_path', 'kwargs', 'disable']);
  if (verifier.disable === true)
    c.fail('verifier.disable', 'termgrade always verifies a trial; a run without grades has nothing to measure');
  if (raw.install_only === true)
    c.fail('install_only', 'termgrade has no install-only run; run-trial with the nop agent checks that a task starts');
  return { env, verifier };
}

/** Environment, verifier and scheduler keys termgrade has no equivalent for. */
function ignoreEnvironmentKeys(c: Collector, raw: Raw, env: Raw, verifier: Raw, orch: Raw): void {
  c.ignore(
    'environment.type',
    env.type,
    'termgrade runs trials on Docker engines (--engine for more than the local one)',
    'docker',
  );
  c.ignore(
    'environment.import_path',
    env.import_path,
    'termgrade runs trials on Docker engines; no environment plugins',
  );
  c.ignore(
    'environment.delete',
    env.delete,
    "termgrade always removes a trial's container (snapshots of what is graded are kept)",
    true,
  );
  for (const k of ['override_cpus', 'override_memory_mb', 'override_storage_mb', 'override_gpus'])
    c.ignore(`environment.${k}`, env[k], "resources come from each task's task.toml");
  c.ignore(
    'environment.suppress_override_warnings',
    env.suppress_override_warnings,
    'no resource overrides to warn about',
    false,
  );
  c.ignore('environment.mounts', env.mounts ?? env.mounts_json, 'trials get no host mounts (isolation)');
  c.ignore('environment.extra_docker_compose', env.extra_docker_compose, 'no docker compose: one container per trial');
  c.ignore(
    'environment.env',
    env.env,
    "the environment's variables come from task.toml; agent variables go in agents[].env or --env-file",
  );
  c.ignore('environment.kwargs', env.kwargs, 'no environment plugin takes arguments');
  c.ignore(
    'verifier.override_timeout_sec',
    verifier.override_timeout_sec,
    'the verifier timeout comes from task.toml, scaled by verifier_timeout_multiplier',
  );
  c.ignore('verifier.max_timeout_sec', verifier.max_timeout_sec, 'no cap on the verifier timeout in termgrade');
  c.ignore('verifier.env', verifier.env, "the verifier's variables come from task.toml");
  c.ignore('verifier.import_path', verifier.import_path, "termgrade runs the task's tests/test.sh");
  c.ignore('verifier.kwargs', verifier.kwargs, "termgrade runs the task's tests/test.sh");
  c.ignore(
    'environment_build_timeout_multiplier',
    raw.environment_build_timeout_multiplier,
    "build timeouts come from task.toml's build_timeout_sec",
    1,
  );
  c.ignore(
    'orchestrator.type',
    orch.type,
    'termgrade has one scheduler (local, or over several engines with --engine)',
    'local',
  );
  c.ignore('orchestrator.kwargs', orch.kwargs, 'the scheduler takes no arguments');
  c.ignore('quiet', raw.quiet ?? orch.quiet, 'progress output is a flag of run (-q)', false);
  c.ignore('debug', raw.debug, 'no debug switch in the job; each trial keeps its logs', false);
}

/** Retry and remaining top-level keys termgrade has no equivalent for. */
function ignoreRetryAndExtras(c: Collector, raw: Raw, retry: Raw): void {
  c.ignore(
    'retry.include_exceptions',
    retry.include_exceptions,
    'termgrade retries infrastructure failures only (build, engine, sandbox lost); agent and verifier outcomes are recorded, never retried',
  );
  // Harbor's default exclusions are outcomes termgrade never retries either: the same behaviour.
  const excluded = Array.isArray(retry.exclude_exceptions) ? retry.exclude_exceptions : [];
  c.ignore(
    'retry.exclude_exceptions',
    excluded.filter((e) => !HARBOR_NOT_RETRIED.includes(String(e))),
    'termgrade retries infrastructure failures only; exception names do not apply',
  );
  for (const [k, dflt] of [
    ['wait_multiplier', 1],
    ['min_wait_sec', 1],
    ['max_wait_sec', 60],
  ] as const)
    c.ignore(`retry.${k}`, retry[k], 'retries of infrastructure failures start at once', dflt);
  c.rest('retry.', retry, [
    'max_retries',
    'include_exceptions',
    'exclude_exceptions',
    'wait_multiplier',
    'min_wait_sec',
    'max_wait_sec',
  ]);
  c.ignore('metrics', raw.metrics, 'termgrade computes pass@1, pass@k and per-task rates itself (stats, report)');
  c.ignore('artifacts', raw.artifacts, "collected artifacts come from the task's [[verifier.collect]]");
  c.ignore('extra_instruction_paths', raw.extra_instruction_paths, "the agent is told the task's instruction.md only");
  c.ignore('plugins', raw.plugins, 'no plugins; custom agents are agent modules (import_path)');
  c.ignore('search', isObject(raw.search) && raw.search.enabled ? raw.search : undefined, 'no test-time search');
}

/**
 * Harbor's job config as a termgrade job spec. `where` names the file in messages; `cwd` is what
 * Harbor resolves relative paths against (its working directory); `fallbackName` names a job
 * whose config has no job_name (Harbor would use the time).
 */
export function harborConfigToSpec(raw: unknown, where: string, cwd: string, fallbackName: string): HarborConversion {
  const c: Collector = new Collector(where);
  if (!isObject(raw)) c.fail('(top level)', 'expected a mapping');
  c.rest('', raw, [...HARBOR_TOP_KEYS, 'agents', 'tasks']);
  const orch = raw.orchestrator ?? {};
  if (!isObject(orch)) c.fail('orchestrator', 'expected a mapping');
  c.rest('orchestrator.', orch, ['type', 'n_concurrent_trials', 'quiet', 'retry', 'kwargs']);
  const retry = raw.retry ?? orch.retry ?? {};
  if (!isObject(retry)) c.fail('retry', 'expected a mapping');
  const modules: HarborConversion['modules'] = [];
  const agentsRaw = raw.agents ?? [{}];
  if (!Array.isArray(agentsRaw) || !agentsRaw.length) c.fail('agents', 'expected a non-empty list');
  const agents = agentsRaw.map((a, i) => convertAgent(c, a, i, modules));
  const source = convertDatasets(c, raw, cwd);
  const { k, concurrency, agentX, verifierX, setupX } = convertCounts(c, raw, orch);
  const maxRetries = convertMaxRetries(c, retry);
  const { env, verifier } = readEnvironmentAndVerifier(c, raw);
  ignoreEnvironmentKeys(c, raw, env, verifier, orch);
  ignoreRetryAndExtras(c, raw, retry);

  const jobName = typeof raw.job_name === 'string' ? raw.job_name : fallbackName;
  const spec: JobSpecInput = {
    name: jobName,
    tasks: {
      paths: source.paths,
      include: source.include,
      exclude: source.exclude,
      ...(source.limit !== undefined ? { limit: source.limit } : {}),
    },
    agents,
    ...(k !== undefined ? { k } : {}),
    ...(concurrency !== undefined ? { concurrency } : {}),
    timeouts: {
      agentMultiplier: agentX,
      verifierMultiplier: verifierX,
      ...(setupX !== 1 ? { agentSetupSec: 600 * setupX } : {}),
    },
    ...(env.force_build === true ? { forceBuild: true } : {}),
    ...(maxRetries !== undefined ? { infraRetries: maxRetries } : {}),
    // The run writes Harbor's job folder where Harbor would: jobs_dir, else Harbor's default `jobs`.
    harborJobsDir: path.resolve(cwd, typeof raw.jobs_dir === 'string' ? raw.jobs_dir : 'jobs'),
  };
  return { spec, ignored: c.ignored, modules };
}

/** The one warning that names every Harbor field left out, with why. */
export function ignoredWarning(where: string, ignored: IgnoredField[]): string | null {
  if (!ignored.length) return null;
  return `${where}: read as a Harbor job config; ${ignored.length} field(s) have no termgrade equivalent or differ:\n${ignored.map((i) => `  ${i.field}: ${i.why}`).join('\n')}`;
}
