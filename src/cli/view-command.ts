import { TermgradeError } from '../util/errors.js';
import { tokenFromEnv } from './token-env.js';
import { startViewer } from '../view/server.js';

/** Serves the viewer until SIGINT / SIGTERM; prints one JSON line {url, open} once listening. */
export async function viewCommand(
  sources: string[],
  flags: { host: string; port: number; tokenEnv?: string; jobsDir: string; allowedHost?: string[] },
): Promise<number> {
  const token = tokenFromEnv(flags.tokenEnv);
  const { existsSync } = await import('node:fs');
  // Without sources: --jobs-dir itself, watched, so jobs made after the viewer started appear too.
  const list = sources.length ? sources : existsSync(flags.jobsDir) ? [flags.jobsDir] : [];
  if (!list.length)
    throw new TermgradeError(
      'usage',
      `nothing to show: give job folders, check outputs or trial folders (no jobs in ${flags.jobsDir})`,
    );
  const viewer = await startViewer({
    sources: list,
    host: flags.host,
    port: flags.port,
    token,
    allowedHosts: flags.allowedHost,
  });
  // A token the operator chose (--token-env) is never printed; a generated one must be, or nobody could open the page.
  const open = viewer.tokenGenerated ? viewer.openUrl : viewer.url;
  process.stderr.write(
    `termgrade view: ${list.length} source(s); open ${open}${viewer.tokenGenerated ? '' : ` with ?token=<the value of ${flags.tokenEnv}>`}\n`,
  );
  process.stdout.write(`${JSON.stringify({ url: viewer.url, open })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await viewer.close();
  return 0;
}
