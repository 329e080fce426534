import type { FastifyInstance } from 'fastify';
import { TermgradeError } from './errors.js';

/**
 * Listens, turning an address the machine cannot give (in use, not ours, privileged) into bad
 * input that names it, not a crash.
 */
export async function listenOn(app: FastifyInstance, host: string, port: number, what: string): Promise<string> {
  try {
    return await app.listen({ host, port });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'EADDRINUSE'
        ? 'is already in use (another server holds it: pick another --port, or 0 for any free one)'
        : code === 'EACCES'
          ? 'needs privileges this user lacks (pick a --port above 1023)'
          : code === 'EADDRNOTAVAIL'
            ? 'is not an address of this machine (check --host)'
            : null;
    if (why) throw new TermgradeError('usage', `${what}: port ${port} on ${host} ${why}`, { cause: err });
    throw err;
  }
}
