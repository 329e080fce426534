import { preludeAt } from './hacks.js';

/**
 * Mutants that keep a source file's text and remove its behaviour, for the probe of tests that read
 * code instead of running it (text-probe.ts). Every line of the original stays, byte for byte, in
 * order; one line added where the language runs it first makes every use of the file fail: a
 * Python module raises as it loads, a shell script exits 97 first thing, a C or C++ file traps in a
 * constructor (before main, or as a library is loaded), a Go file panics in an init function, a
 * JavaScript file throws as it is evaluated. A test that greps the file for a name or an expression
 * still finds it; a test that imports, runs, compiles-and-runs or links it fails. Pure; no I/O.
 */
export type SourceKind = 'python' | 'shell' | 'c' | 'go' | 'javascript';

/** The kinds covered, for the README and the finding. */
export const MUTANT_KINDS: readonly SourceKind[] = ['python', 'shell', 'c', 'go', 'javascript'];

const MARK = 'termgrade: the text is kept, the behaviour removed';

/** A source file's kind, from its first line (a shebang) or its name; null for anything else. */
export function sourceKind(file: string, text: string): SourceKind | null {
  const first = text.slice(0, text.indexOf('\n') >>> 0).trim();
  if (first.startsWith('#!')) {
    if (/python/.test(first)) return 'python';
    if (/\/(env\s+)?(ba|da|z|k)?sh\b/.test(first)) return 'shell';
    if (/\bnode\b/.test(first)) return 'javascript';
    return null;
  }
  if (/\.py$/.test(file)) return 'python';
  if (/\.(sh|bash)$/.test(file)) return 'shell';
  if (/\.(c|h|cc|cpp|cxx|hpp|hh)$/.test(file)) return 'c';
  if (/\.go$/.test(file)) return 'go';
  if (/\.(js|mjs|cjs)$/.test(file)) return 'javascript';
  return null;
}

/** The line added, per kind (Go's goes last: a package clause must come first). */
const ADDED: Record<SourceKind, string> = {
  python: `raise RuntimeError(${JSON.stringify(MARK)})`,
  shell: `echo ${JSON.stringify(MARK)} >&2; exit 97`,
  c: `__attribute__((constructor)) static void termgrade_mutant(void) { __builtin_trap(); } /* ${MARK} */`,
  go: `func init() { panic(${JSON.stringify(MARK)}) }`,
  javascript: `throw new Error(${JSON.stringify(MARK)});`,
};

/**
 * The file with its text kept and its behaviour removed: the added line after a shebang (and, for
 * Python, after leading comments and `from __future__` imports, which must come first), or at the
 * end for Go. Returns the mutant and the line added, for the finding.
 */
export function mutant(kind: SourceKind, text: string): { content: string; added: string } {
  const added = ADDED[kind];
  const lines = text.split('\n');
  if (kind === 'go') return { content: `${text.replace(/\n?$/, '\n')}${added}\n`, added };
  const at = kind === 'python' ? preludeAt(lines) : lines[0]!.startsWith('#!') ? 1 : 0;
  return { content: [...lines.slice(0, at), added, ...lines.slice(at)].join('\n'), added };
}
