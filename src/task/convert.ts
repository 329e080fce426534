import { cp, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { stringify as stringifyToml } from 'smol-toml';
import { parse as parseYaml } from 'yaml';
import { TermgradeError } from '../util/errors.js';
import { exists } from '../util/files.js';

/**
 * Terminal-Bench 1 task folders into the Harbor layout, so the many published TB1-format tasks can
 * be checked. A TB1 task has task.yaml (instruction, timeouts, metadata), a Dockerfile (and maybe
 * docker-compose.yaml) at its root, solution.sh or solution.yaml, run-tests.sh and tests/.
 * What cannot be carried over is named in the result (and in CONVERT.md in the new folder).
 */
export interface Converted {
  from: string;
  to: string;
  /** Parts of the TB1 task that could not be converted faithfully, with why. */
  unconverted: string[];
}

interface Tb1Yaml {
  instruction?: string;
  descriptions?: Array<{ key?: string; description?: string }>;
  author_email?: string;
  author_name?: string;
  difficulty?: string;
  category?: string;
  tags?: string[];
  max_agent_timeout_sec?: number;
  max_test_timeout_sec?: number;
  expert_time_estimate_min?: number;
  junior_time_estimate_min?: number;
  parser_name?: string;
  run_tests_in_same_shell?: boolean;
}

const TB1_OWN = new Set([
  'task.yaml',
  'solution.sh',
  'solution.yaml',
  'run-tests.sh',
  'tests',
  'docker-compose.yaml',
  'docker-compose.yml',
]);

/**
 * The reward file from run-tests.sh's exit code, as TB1's pytest parser would judge it. Run from
 * the verifier's working folder (the image's WORKDIR), as TB1 runs it: tests that use relative
 * paths find the task's files.
 */
const TEST_SH = `#!/bin/bash
# Converted from Terminal-Bench 1: run-tests.sh decides (exit code 0 = every test passed).
export TEST_DIR=/tests
bash /tests/run-tests.sh
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
`;

export async function convertTb1Task(src: string, dest: string): Promise<Converted> {
  const yamlFile = path.join(src, 'task.yaml');
  const meta = await readTb1Yaml(yamlFile);
  const unconverted: string[] = [];
  const instruction = await tb1Instruction(src, yamlFile, meta, unconverted);
  await noteCompose(src, unconverted);

  await mkdir(path.join(dest, 'environment'), { recursive: true });
  for (const entry of await readdir(src)) {
    if (!TB1_OWN.has(entry))
      await cp(path.join(src, entry), path.join(dest, 'environment', entry), {
        recursive: true,
        verbatimSymlinks: true,
      });
  }

  await convertSolution(src, dest, unconverted);
  await convertTests(src, dest, unconverted);
  await writeHarborFiles(dest, meta, instruction, unconverted);
  return { from: src, to: dest, unconverted };
}

async function readTb1Yaml(yamlFile: string): Promise<Tb1Yaml> {
  try {
    return (parseYaml(await readFile(yamlFile, 'utf8')) ?? {}) as Tb1Yaml;
  } catch (err) {
    throw new TermgradeError(
      'bad_input',
      `${yamlFile}: not a readable Terminal-Bench 1 task.yaml (${(err as Error).message.split('\n')[0]})`,
    );
  }
}

/** The instruction, once task.yaml and the Dockerfile are checked; what task.yaml holds that is not carried over noted. */
async function tb1Instruction(src: string, yamlFile: string, meta: Tb1Yaml, unconverted: string[]): Promise<string> {
  const instruction =
    meta.instruction ??
    meta.descriptions?.find((d) => d.key === 'base')?.description ??
    meta.descriptions?.[0]?.description;
  if (!instruction)
    throw new TermgradeError('bad_input', `${yamlFile}: no instruction (neither "instruction" nor "descriptions")`);
  if (meta.descriptions && meta.descriptions.length > 1)
    unconverted.push(
      `task.yaml: ${meta.descriptions.length - 1} description variant(s) besides the base one (only the base is the instruction)`,
    );
  if (!(await exists(path.join(src, 'Dockerfile'))))
    throw new TermgradeError('bad_input', `${src}: no Dockerfile at the task's root`);
  if (meta.parser_name && meta.parser_name !== 'pytest')
    unconverted.push(
      `task.yaml: parser_name "${meta.parser_name}": the converted verifier judges by run-tests.sh's exit code`,
    );
  if (meta.run_tests_in_same_shell)
    unconverted.push(
      'task.yaml: run_tests_in_same_shell: tests run in their own shell after the agent, as Harbor runs them',
    );
  return instruction;
}

/** docker-compose files: never carried over, noted. */
async function noteCompose(src: string, unconverted: string[]): Promise<void> {
  for (const compose of ['docker-compose.yaml', 'docker-compose.yml']) {
    const file = path.join(src, compose);
    if (!(await exists(file))) continue;
    const doc = parseYaml(await readFile(file, 'utf8')) as { services?: Record<string, unknown> } | null;
    const services = Object.keys(doc?.services ?? {});
    if (services.length > 1)
      unconverted.push(
        `${compose}: ${services.length} services (${services.join(', ')}); only the task's own Dockerfile is built, the others are not started`,
      );
    else
      unconverted.push(
        `${compose}: its settings (volumes, environment) are not carried over; the Dockerfile is built alone`,
      );
  }
}

/** solution.sh (or solution.yaml's steps as commands) into solution/solve.sh. */
async function convertSolution(src: string, dest: string, unconverted: string[]): Promise<void> {
  await mkdir(path.join(dest, 'solution'), { recursive: true });
  if (await exists(path.join(src, 'solution.sh'))) {
    await cp(path.join(src, 'solution.sh'), path.join(dest, 'solution', 'solve.sh'));
  } else if (await exists(path.join(src, 'solution.yaml'))) {
    const steps = (parseYaml(await readFile(path.join(src, 'solution.yaml'), 'utf8')) ?? []) as Array<{
      command?: string;
      append_enter?: boolean;
      block?: boolean;
      min_timeout_sec?: number;
    }>;
    const lines: string[] = ['#!/bin/bash', '# Converted from solution.yaml: each keystroke step as a command.'];
    steps.forEach((s, i) => {
      if (typeof s.command !== 'string') return;
      if (s.append_enter === false || /\b(C-[a-z]|Escape|Enter)\b/.test(s.command))
        unconverted.push(
          `solution.yaml step ${i + 1}: keystrokes (${JSON.stringify(s.command.slice(0, 40))}) that are not a whole command`,
        );
      // A step that does not block runs on in the background (its YAML text may end in a newline).
      lines.push(s.block === false ? `${s.command.trimEnd()} &` : s.command.trimEnd());
    });
    await writeFile(path.join(dest, 'solution', 'solve.sh'), `${lines.join('\n')}\n`, { mode: 0o755 });
  } else {
    unconverted.push('no solution.sh or solution.yaml: the task has no reference solution (check needs one)');
  }
}

/** tests/ and run-tests.sh into tests/, with a test.sh that writes the reward from its exit code. */
async function convertTests(src: string, dest: string, unconverted: string[]): Promise<void> {
  await mkdir(path.join(dest, 'tests'), { recursive: true });
  if (await exists(path.join(src, 'tests')))
    await cp(path.join(src, 'tests'), path.join(dest, 'tests'), { recursive: true, verbatimSymlinks: true });
  if (await exists(path.join(src, 'run-tests.sh'))) {
    await cp(path.join(src, 'run-tests.sh'), path.join(dest, 'tests', 'run-tests.sh'));
    await writeFile(path.join(dest, 'tests', 'test.sh'), TEST_SH, { mode: 0o755 });
    const runTests = await readFile(path.join(src, 'run-tests.sh'), 'utf8');
    if (/\b(pip|uv|curl|wget|apt-get)\b/.test(runTests))
      unconverted.push(
        'run-tests.sh installs tools at test time (pip, uv, curl ...): offline grading needs them baked into the image',
      );
  } else {
    unconverted.push('no run-tests.sh: no verifier (tests/test.sh writes no reward)');
  }
}

/** instruction.md, task.toml and (when something was not carried over) CONVERT.md. */
async function writeHarborFiles(
  dest: string,
  meta: Tb1Yaml,
  instruction: string,
  unconverted: string[],
): Promise<void> {
  await writeFile(path.join(dest, 'instruction.md'), instruction.endsWith('\n') ? instruction : `${instruction}\n`);
  const toml = {
    version: '1.0',
    task: { name: path.basename(dest) },
    metadata: Object.fromEntries(
      Object.entries({
        author_name: meta.author_name,
        author_email: meta.author_email,
        difficulty: meta.difficulty,
        category: meta.category,
        tags: meta.tags,
        expert_time_estimate_min: meta.expert_time_estimate_min,
        junior_time_estimate_min: meta.junior_time_estimate_min,
        converted_from: 'terminal-bench-1',
      }).filter(([, v]) => v !== undefined),
    ),
    verifier: { timeout_sec: meta.max_test_timeout_sec ?? 180, env: { TEST_DIR: '/tests' } },
    agent: { timeout_sec: meta.max_agent_timeout_sec ?? 360 },
  };
  await writeFile(path.join(dest, 'task.toml'), stringifyToml(toml));
  if (unconverted.length)
    await writeFile(
      path.join(dest, 'CONVERT.md'),
      `# Converted from Terminal-Bench 1\n\nNot carried over faithfully:\n\n${unconverted.map((u) => `- ${u}`).join('\n')}\n`,
    );
}

/** Every TB1 task folder below `src` (a folder holding task.yaml), converted into `dest`/<name>. */
export async function convertTb1(src: string, dest: string): Promise<Converted[]> {
  const roots = (await exists(path.join(src, 'task.yaml')))
    ? [src]
    : (await readdir(src, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => path.join(src, e.name));
  const out: Converted[] = [];
  for (const root of roots.sort()) {
    if (!(await exists(path.join(root, 'task.yaml')))) continue;
    out.push(await convertTb1Task(root, path.join(dest, path.basename(root))));
  }
  if (out.length === 0)
    throw new TermgradeError('bad_input', `${src}: no Terminal-Bench 1 task (a folder with task.yaml) found`);
  return out;
}
