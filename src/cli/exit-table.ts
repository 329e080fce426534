import { ERROR_CODES, EXIT, EXIT_MEANS } from '../util/errors.js';

/**
 * The README's exit-code table, rendered from the one table of exit and error codes
 * (util/errors.ts). test/exit-codes.test.ts fails when the README's copy differs; paste this.
 */
export function exitCodeTable(): string {
  const rows = (Object.keys(EXIT) as (keyof typeof EXIT)[]).map((name) => {
    const codes = Object.entries(ERROR_CODES)
      .filter(([, exit]) => exit === name)
      .map(([code]) => `\`${code}\``);
    return `| ${EXIT[name]} | ${EXIT_MEANS[name]} | ${codes.join(', ')} |`;
  });
  return ['| exit | means | error codes that end a command with it |', '| --- | --- | --- |', ...rows].join('\n');
}
