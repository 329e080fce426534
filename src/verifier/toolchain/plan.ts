import path from 'node:path';
import type { Task } from '../../task/task.js';
import { readTextIfThere } from '../../util/files.js';
import { verifierNeeds, type NetworkCommand, type VerifierNeeds } from './needs.js';
import {
  debianPackageOf,
  OFFLINE_FETCH_ENV,
  PIP_SHIM_ENV,
  offlineFetchContext,
  offlineFetchLayer,
  offlineFetchTag,
  PROVIDED,
  toolchainContext,
  toolchainLayer,
  toolchainTag,
  TOOLCHAIN_PYTHON,
  type ToolchainExtras,
} from './recipe.js';
import { readdir } from 'node:fs/promises';
import { TermgradeError, errorMessage } from '../../util/errors.js';

/**
 * How a task's verifier grades with no network:
 * - `offline`: test.sh fetches nothing; it grades as written;
 * - `toolchain`: it fetches its tools, and termgrade's offline toolchain serves every uvx pytest
 *   run and pip install it makes (the other fetching lines then fail harmlessly; uvx, and for pip
 *   installs pip, pip3, uv and pytest, are the toolchain's);
 * - `needs-network`: it fetches something the toolchain does not serve (a requirement it lacks,
 *   python3 -m pip, uv venv, a download the tests use): it cannot grade offline, and `unmet` says why.
 */
export type VerifierPlan =
  | { kind: 'offline' }
  | {
      kind: 'toolchain';
      commands: NetworkCommand[];
      /** What stands in for each pinned requirement (`pandas==2.2.3 -> Debian python3-pandas`). */
      substituted: string[];
      /** What the toolchain serves beyond its base set, for this task: Debian packages and the user's wheels. */
      extras: ToolchainExtras;
      /**
       * Packages test.sh installs with apt beyond the uv installer's: the toolchain cannot install
       * them, so the tests pass offline only when the image already has them (the oracle decides).
       */
      aptPackages: string[];
      /**
       * test.sh's pip / uv pip install lines are served: the toolchain's pip, pip3, uv and pytest
       * come first on the verifier's PATH (through bash's BASH_ENV, so the agent's PATH is untouched).
       */
      pipServed: boolean;
    }
  | { kind: 'needs-network'; commands: NetworkCommand[]; unmet: string[] };

const requirementName = (req: string): string =>
  req
    .trim()
    .split(/[[<>=!~;@ ]/, 1)[0]!
    .replace(/[-_.]+/g, '-')
    .toLowerCase();

/** Whether a `-p` value (3.11, 3.11.2, python3.11, cpython@3.11, 3) names the toolchain's Python (uvx.py's same_python). */
export function samePython(asked: string): boolean {
  const m = /(\d+(?:\.\d+)*)/.exec(asked);
  if (!m) return false;
  const want = m[1]!.split('.');
  const have = TOOLCHAIN_PYTHON.split('.');
  // A patch level asked is not known before the build: the minor version decides.
  return want.slice(0, 2).every((p, i) => p === have[i]);
}

/**
 * The toolchain's answer to what test.sh fetches. Pure. A `-w` requirement (or a pip install's) the base set lacks is
 * served from a wheel of the user's folder (`wheels`: requirement name -> file) when it has one,
 * else from Debian's package of it (whether Debian has one is known once the toolchain is built:
 * uvx then names it and the next step).
 */
export function planOf(needs: VerifierNeeds, wheels: Record<string, string> = {}): VerifierPlan {
  if (needs.commands.length === 0) return { kind: 'offline' };
  const unmet: string[] = [];
  const substituted: string[] = [];
  const extras: ToolchainExtras = { debs: {}, wheels: {} };
  /** Serves one requirement (a `-w` of uvx or a pip install's): whether it could. */
  const serve = (req: string, line: number): boolean => {
    const name = requirementName(req);
    const pinned = /[<>=!~]/.test(req);
    if (name in PROVIDED) {
      if (pinned) substituted.push(`${req} -> ${PROVIDED[name]}`);
    } else if (wheels[name]) {
      extras.wheels[name] = wheels[name];
      substituted.push(`${req} -> wheel ${path.basename(wheels[name])}`);
    } else if (/^[a-z0-9][a-z0-9-]*$/.test(name) && !/[@:/]/.test(req) && !/\.(whl|tar\.gz|zip)$/.test(req)) {
      extras.debs[name] = debianPackageOf(name);
      substituted.push(`${req} -> Debian ${extras.debs[name]}`);
    } else {
      unmet.push(`line ${line}: requirement ${req} is neither a package name Debian could serve nor a wheel given`);
      return false;
    }
    return true;
  };
  // pip / pip3 / uv pip install: served as uvx's -w are, by the toolchain's pip and uv (first on
  // the verifier's PATH); `python3 -m pip` runs the image's own interpreter, which it cannot stand in for.
  const servedPipLines = new Set<number>();
  let pipServed = false;
  for (const pip of needs.pipInstalls) {
    const before = unmet.length;
    if (pip.via === 'python')
      unmet.push(
        `line ${pip.line}: pip install needs the network: ${pip.command} (python3 -m pip is not served offline; pip, pip3 and uv pip install are)`,
      );
    else {
      for (const f of pip.unknownFlags)
        unmet.push(`line ${pip.line}: pip install needs the network: ${pip.command} (${f} has no offline equivalent)`);
      if (pip.requirements.length === 0 && pip.unknownFlags.length === 0)
        unmet.push(`line ${pip.line}: pip install names no requirement: ${pip.command}`);
      for (const req of pip.requirements) serve(req, pip.line);
    }
    if (unmet.length === before) {
      servedPipLines.add(pip.line);
      pipServed = true;
    } else servedPipLines.delete(pip.line);
  }
  for (const c of needs.fatal)
    if (!(c.kind === 'pip' && servedPipLines.has(c.line)))
      unmet.push(`line ${c.line}: its failure offline ends test.sh before it grades (set -e or || exit): ${c.command}`);
  for (const c of needs.otherUv)
    unmet.push(`line ${c.line}: only a pytest run through uvx, uv tool run or uv run is served offline: ${c.command}`);
  for (const run of needs.uvxPytest) {
    if (run.python && !samePython(run.python))
      substituted.push(
        `python ${run.python} -> Debian python3 ${TOOLCHAIN_PYTHON} (the toolchain has no other Python)`,
      );
    for (const req of run.with) serve(req, run.line);
    for (const f of run.unknownFlags) unmet.push(`line ${run.line}: uvx ${f} has no offline equivalent`);
  }
  // Downloads other than uv's installer may be what the tests use (a dataset, a binary).
  for (const c of needs.commands) {
    if (c.kind === 'download' && !/astral\.sh\/uv\b|astral\.sh\/uv\/|github\.com\/astral-sh\/uv/.test(c.command))
      unmet.push(`line ${c.line}: downloads ${c.command}`);
  }
  if (needs.uvxPytest.length === 0 && !pipServed)
    unmet.push('no uvx ... pytest run or pip install for the toolchain to serve');
  if (unmet.length) return { kind: 'needs-network', commands: needs.commands, unmet };
  return {
    kind: 'toolchain',
    commands: needs.commands,
    substituted: [...new Set(substituted)],
    extras,
    aptPackages: needs.aptPackages,
    pipServed,
  };
}

/** The plan for a loaded task, from its tests/test.sh. */
export async function verifierPlan(task: Task, options: { wheelsDir?: string } = {}): Promise<VerifierPlan> {
  const script = await readTextIfThere(path.join(task.testsDir, 'test.sh'));
  // Only a multi-step task may have none (each step brings its own): nothing to serve at the root.
  if (script === null) return { kind: 'offline' };
  return planOf(verifierNeeds(script), options.wheelsDir ? await wheelsIn(options.wheelsDir) : {});
}

/**
 * The wheels of a folder the user names, by requirement name (from the wheel's file name,
 * `NAME-VERSION-...whl`). A folder that cannot be read is bad input.
 */
export async function wheelsIn(dir: string): Promise<Record<string, string>> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    throw new TermgradeError('bad_input', `--verifier-wheels ${dir}: ${errorMessage(err)}`);
  }
  const out: Record<string, string> = {};
  for (const f of names.filter((n) => n.endsWith('.whl')).sort())
    out[requirementName(f.split('-', 1)[0]!)] = path.resolve(dir, f);
  if (Object.keys(out).length === 0)
    throw new TermgradeError('bad_input', `--verifier-wheels ${dir}: no .whl file there`);
  return out;
}

/**
 * The task to grade offline: with the toolchain's layer when the plan uses it; with the offline
 * fetch settings alone when test.sh fetches what the toolchain does not serve (its apt-get, wget,
 * pip and uv lines then fail at once, not after their retries: apt-get update alone waited 7-12 s);
 * unchanged when it fetches nothing. The task's own [verifier] env wins over the settings.
 */
export function withVerifierToolchain(task: Task, plan: VerifierPlan): Task {
  if (plan.kind === 'offline') return task;
  const verifier = { ...task.config.verifier, env: { ...OFFLINE_FETCH_ENV, ...task.config.verifier.env } };
  const config = { ...task.config, verifier };
  if (plan.kind === 'needs-network') {
    const tag = offlineFetchTag();
    return {
      ...task,
      config,
      verifierLayer: { lines: offlineFetchLayer(tag), toolchainImage: tag, recipe: offlineFetchContext },
    };
  }
  const tag = toolchainTag(plan.extras);
  return {
    ...task,
    config: plan.pipServed
      ? {
          ...config,
          verifier: { ...verifier, env: { ...OFFLINE_FETCH_ENV, ...PIP_SHIM_ENV, ...task.config.verifier.env } },
        }
      : config,
    verifierLayer: {
      lines: toolchainLayer(tag),
      toolchainImage: tag,
      recipe: () => toolchainContext(plan.extras),
    },
  };
}

/** One line per fetching command, for a reason's details. */
export function describeCommands(commands: NetworkCommand[]): string {
  return commands.map((c) => `line ${c.line} (${c.kind}): ${c.command}`).join('; ');
}

/**
 * A task as a run grades it: a trial without a network (the run names none, or the task does not
 * ask for one) gets the toolchain where its plan uses it; an online trial keeps Harbor's semantics,
 * its verifier fetching its own tools through the agent sandbox's network.
 */
export async function asGraded(task: Task, runNetwork: string | null): Promise<Task> {
  if (task.limits.network && runNetwork) return task;
  return withVerifierToolchain(task, await verifierPlan(task));
}
