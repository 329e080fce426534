import { engineReport } from '../sandbox/pool/inspect.js';
import { EXIT } from './signals.js';
import { table } from './table.js';
import { enginesFromFlags } from '../sandbox/pool/engine-spec.js';

/** Each engine's health, capacity, sandboxes in use and images; exit 3 when none answers. */
export async function enginesCommand(flags: { engine?: string[]; json?: boolean }): Promise<number> {
  const specs =
    enginesFromFlags(flags.engine) ?? enginesFromFlags([process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock'])!;
  const reports = await Promise.all(specs.map(engineReport));
  if (flags.json) process.stdout.write(`${JSON.stringify({ engines: reports })}\n`);
  else {
    process.stdout.write(
      `${table(
        ['engine', 'host', 'answers', 'capacity', 'sandboxes', 'leftovers', 'images'],
        reports.map((r) => [
          r.name,
          r.host,
          r.ok ? r.detail : `no: ${r.detail}`,
          r.capacity,
          r.sandboxes,
          r.leftovers,
          r.images,
        ]),
      )}\n`,
    );
  }
  return reports.some((r) => r.ok) ? EXIT.ok : EXIT.engine;
}
