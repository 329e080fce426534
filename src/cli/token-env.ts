import { TermgradeError } from '../util/errors.js';
import { hideInLogs } from '../util/log.js';

/** The access token a server takes from `--token-env VAR` (never from a flag: it would show in ps). */
export function tokenFromEnv(variable: string | undefined): string | null {
  if (!variable) return null;
  const token = process.env[variable];
  if (!token) throw new TermgradeError('usage', `--token-env ${variable}: the variable is not set`);
  hideInLogs(token);
  return token;
}
