import { tracedCalls } from '../verifier/protection.js';
import { namedInput } from './probe-logic.js';

/**
 * Whether an image file holding an output's bytes is the task's input or a leaked answer, decided
 * by what the reference solution did when it ran (strace's record of its run), not by what the
 * instruction says: a file the solution opened or consumed (the source of a copy, move or archive)
 * is an input; one it never opened is an answer sitting in the image, whatever the instruction says
 * of it ("do not read /app/.expected" names the file, and still leaves it there). Pure; no I/O.
 */

/** The files a traced run opened (to read or write) or executed, successfully: what it read. */
export interface SolutionReads {
  /** Every such path, as called and as resolved (a link's target). */
  opened: Set<string>;
  /** How many distinct files that is: the trace's size, for the finding. */
  count: number;
}

const READ_CALLS = /^(open|openat|openat2|execve|execveat)$/;

/** What a traced run of the solution opened or executed (strace `-f -y` log, as the sandbox records it). */
export function solutionReads(log: string): SolutionReads {
  const opened = new Set<string>();
  for (const c of tracedCalls(log)) {
    if (!c.ok || c.isDir || !READ_CALLS.test(c.name)) continue;
    opened.add(c.path);
    if (c.resolved) opened.add(c.resolved);
  }
  return { opened, count: opened.size };
}

/** One image file holding an output's bytes, and why it is (or is not) an input. */
export interface LeakSource {
  output: string;
  file: string;
  /** A leak candidate: the solution neither read nor consumed it (or, untraced, the task does not name it). */
  hidden: boolean;
  /** The evidence, in words: what the trace (or the naming rule) showed of this file. */
  why: string;
}

/**
 * For each output and the image files holding its bytes, the file to place at the output (the first
 * the solution never read), or, when every one was read, the input it came from. `reads` null: no
 * trace of the solution's run (a backend that cannot trace), and the older rule decides: a file the
 * instruction or solve.sh names (its path or folder) is an input.
 */
export function classifySources(
  candidates: Map<string, string[]>,
  consumed: Set<string>,
  reads: SolutionReads | null,
  named: { texts: string[]; workdir: string | null },
): LeakSource[] {
  const out: LeakSource[] = [];
  for (const [output, sources] of candidates) {
    const judged = sources.map((file): LeakSource => {
      if (consumed.has(file))
        return { output, file, hidden: false, why: 'the solution consumed it (moved or changed it)' };
      if (reads) {
        if (reads.opened.has(file)) return { output, file, hidden: false, why: "the solution's traced run opened it" };
        const says = namedInput(file, named.texts, named.workdir)
          ? ' (the task names it, yet the solution never reads it)'
          : '';
        return {
          output,
          file,
          hidden: true,
          why: `the solution's traced run opened ${reads.count} files and never this one${says}`,
        };
      }
      if (namedInput(file, named.texts, named.workdir))
        return { output, file, hidden: false, why: 'the instruction or solve.sh names it (no trace of the solution)' };
      return { output, file, hidden: true, why: 'nothing names it (no trace of the solution)' };
    });
    out.push(judged.find((j) => j.hidden) ?? judged[0]!);
  }
  return out;
}
