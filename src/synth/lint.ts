import path from 'node:path';
import { parseDockerfile } from '../task/dockerfile.js';
import type { EnvironmentPart } from './schema.js';

/** Every instruction keyword the Dockerfile reference defines. */
const KEYWORDS = new Set([
  'FROM',
  'RUN',
  'CMD',
  'LABEL',
  'MAINTAINER',
  'EXPOSE',
  'ENV',
  'ADD',
  'COPY',
  'ENTRYPOINT',
  'VOLUME',
  'USER',
  'WORKDIR',
  'ARG',
  'ONBUILD',
  'STOPSIGNAL',
  'HEALTHCHECK',
  'SHELL',
]);

/**
 * The cheap check before any build: problems that make a generated environment unbuildable, found
 * by reading it (unknown instructions, no FROM first, a COPY of a file the model did not write, a
 * path escaping the context). Pure; an empty list means "worth building".
 */
export function lintEnvironment(env: EnvironmentPart): string[] {
  const problems: string[] = [];
  const text = env.dockerfile;
  if (text.includes('\0')) return ['Dockerfile: contains a NUL byte'];
  // A line that starts a word but is no instruction (a typo like FRM) cannot parse.
  const joined = text.replace(/\\\r?\n/g, ' ');
  const instructions = parseDockerfile(text);
  const lines = joined.split(/\r?\n/);
  let inHeredoc: string | null = null;
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (inHeredoc !== null) {
      if (line === inHeredoc) inHeredoc = null;
      return;
    }
    if (line === '' || line.startsWith('#')) return;
    const word = /^([A-Za-z]+)(\s|$)/.exec(line)?.[1]?.toUpperCase();
    if (!word || !KEYWORDS.has(word))
      problems.push(`Dockerfile line ${i + 1}: "${line.slice(0, 60)}" is not a Dockerfile instruction`);
    const heredoc = /<<-?(["']?)([A-Za-z_][A-Za-z0-9_]*)\1/.exec(line);
    if (heredoc && (word === 'RUN' || word === 'COPY' || word === 'ADD')) inHeredoc = heredoc[2]!;
  });
  const first = instructions.find((i) => i.keyword !== 'ARG');
  if (!first) problems.push('Dockerfile: no instruction at all');
  else if (first.keyword !== 'FROM')
    problems.push(`Dockerfile line ${first.line}: the first instruction (after ARGs) is ${first.keyword}, not FROM`);
  const written = new Set(env.files.map((f) => path.posix.normalize(f.path)));
  for (const f of env.files) {
    if (path.posix.normalize(f.path) === 'Dockerfile')
      problems.push('files: names Dockerfile, which is the dockerfile field');
  }
  for (const ins of instructions) {
    if (ins.keyword !== 'COPY' && ins.keyword !== 'ADD') continue;
    if (ins.heredocs.length) continue;
    const args = ins.args.split(/\s+/).filter((a) => a !== '');
    if (args.some((a) => a.startsWith('--from'))) continue;
    const sources = args.filter((a) => !a.startsWith('--')).slice(0, -1);
    if (sources.length === 0)
      problems.push(`Dockerfile line ${ins.line}: ${ins.keyword} needs a source and a destination`);
    for (const src of sources) {
      if (/^[a-z]+:\/\//i.test(src)) {
        problems.push(
          `Dockerfile line ${ins.line}: ${ins.keyword} from a URL (${src}) fetches at build time; write the file instead`,
        );
        continue;
      }
      const norm = path.posix.normalize(src.replace(/^\.\//, ''));
      if (norm.startsWith('..') || src.startsWith('/')) {
        problems.push(`Dockerfile line ${ins.line}: ${ins.keyword} source ${src} is outside the build context`);
        continue;
      }
      if (/[*?[]/.test(norm) || norm === '.') continue;
      const covered = written.has(norm) || [...written].some((w) => w.startsWith(`${norm}/`));
      if (!covered)
        problems.push(`Dockerfile line ${ins.line}: ${ins.keyword} source ${src} is not among the files written`);
    }
  }
  return problems;
}
