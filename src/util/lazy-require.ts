import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * A CommonJS package loaded on first use instead of at import. For the @stdlib functions: each is
 * hundreds of one-function packages (the eight the stats use are 680 files), about 0.2 CPU-s to
 * load, which every CLI process paid at start whether or not it computed a statistic (check,
 * run-trial and serve never do).
 */
// require() is untyped: the package's type is the caller's to name, so T appears once by design.
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters
export function lazyRequire<T>(spec: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(spec) as T);
}
