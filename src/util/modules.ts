import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { TermgradeError, errnoOf, errorMessage } from './errors.js';

/** A module named by a path (./x.js, /abs/x.js, x.mjs) rather than a package name. */
export function isModuleFile(spec: string): boolean {
  return spec.startsWith('.') || path.isAbsolute(spec) || /\.(m?js|cjs)$/.test(spec);
}

/** A file is loaded from its path; anything else as a package resolved from `from`. */
function resolveModule(spec: string, from: string, what: string): string {
  if (isModuleFile(spec)) return pathToFileURL(path.resolve(from, spec)).href;
  try {
    return pathToFileURL(createRequire(path.join(from, 'package.json')).resolve(spec)).href;
  } catch (err) {
    const why = errnoOf(err) === 'MODULE_NOT_FOUND' ? 'no such file or package' : errorMessage(err);
    throw new TermgradeError('usage', `${what} module "${spec}": ${why} (looked from ${from})`);
  }
}

/**
 * A plugin module from outside the package (an agent, a sandbox backend), by path or package name:
 * its exports. `usage` error naming the module and why it cannot be loaded.
 */
export async function importModule(spec: string, from: string, what: string): Promise<Record<string, unknown>> {
  const url = resolveModule(spec, from, what);
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ERR_MODULE_NOT_FOUND' ? 'no such file' : (err as Error).message.split('\n')[0];
    throw new TermgradeError('usage', `${what} module ${spec}: cannot be loaded: ${why}`);
  }
}
