import { TermgradeError, errorMessage } from '../util/errors.js';
import type { SandboxProvider } from '../sandbox/sandbox.js';
import { ATTACK_CHECKS } from './attack-checks.js';
import { CheckContext, CheckFailed, type SelfCheck } from './context.js';
import { CONTRACT_CHECKS } from './contract-checks.js';
import { ISOLATION_CHECKS } from './isolation-checks.js';
import { SELFCHECK_IMAGE } from './task.js';

/** Every check, in the order they run. */
export const SELF_CHECKS: readonly SelfCheck[] = [...CONTRACT_CHECKS, ...ISOLATION_CHECKS, ...ATTACK_CHECKS];

export interface CheckResult {
  name: string;
  status: 'pass' | 'fail' | 'skip';
  /** Why it failed or was skipped; empty on a pass. */
  detail: string;
  ms: number;
}

export interface SelfCheckOptions {
  /** The image the checks' task builds FROM (sh, coreutils, bash); default debian:bookworm-slim. */
  image?: string;
  /** Only the checks of these names. */
  only?: string[];
  /** Longest a check may take, ms; past it the check fails. Default 5 minutes. */
  checkTimeoutMs?: number;
  onResult?: (r: CheckResult) => void;
}

/** One check, its sandboxes closed whatever happens; a timeout or any error is its failure. */
async function runOne(provider: SandboxProvider, check: SelfCheck, options: SelfCheckOptions): Promise<CheckResult> {
  const lacking = check.needs.filter((c) => !provider.capabilities[c]);
  if (lacking.length)
    return {
      name: check.name,
      status: 'skip',
      detail: `the ${provider.name} backend lacks ${lacking.join(', ')}`,
      ms: 0,
    };
  const started = performance.now();
  const limit = options.checkTimeoutMs ?? 300_000;
  const ctx = new CheckContext(provider, options.image ?? SELFCHECK_IMAGE, AbortSignal.timeout(limit));
  const ms = (): number => Math.round(performance.now() - started);
  try {
    await check.run(ctx);
    return { name: check.name, status: 'pass', detail: '', ms: ms() };
  } catch (err) {
    const why = ctx.signal.aborted
      ? `did not finish within ${limit / 1000} s (${errorMessage(err)})`
      : err instanceof CheckFailed
        ? err.message
        : `error: ${errorMessage(err)}`;
    return { name: check.name, status: 'fail', detail: why, ms: ms() };
  } finally {
    await ctx.dispose();
  }
}

/**
 * Runs the Sandbox contract's checks against a provider, one after another: a check the backend
 * lacks a capability for is skipped, saying which (never passed). `ok` is false on any failure.
 */
export async function selfcheck(
  provider: SandboxProvider,
  options: SelfCheckOptions = {},
): Promise<{ provider: string; ok: boolean; results: CheckResult[] }> {
  const unknown = options.only?.filter((n) => !SELF_CHECKS.some((c) => c.name === n)) ?? [];
  if (unknown.length)
    throw new TermgradeError(
      'usage',
      `--only: no self-check named ${unknown.join(', ')} (known: ${SELF_CHECKS.map((c) => c.name).join(', ')})`,
    );
  const results: CheckResult[] = [];
  for (const check of SELF_CHECKS) {
    if (options.only && !options.only.includes(check.name)) continue;
    const r = await runOne(provider, check, options);
    options.onResult?.(r);
    results.push(r);
  }
  return { provider: provider.name, ok: results.every((r) => r.status !== 'fail'), results };
}
