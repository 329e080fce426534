import path from 'node:path';
import { z } from 'zod';
import { TermgradeError } from '../../util/errors.js';

/**
 * One Docker engine of a pool: where it is, how many sandboxes it holds at once, and labels for
 * the user's own bookkeeping. Transports are dockerode's own: a local socket, `tcp://` (TLS client
 * certificates required unless the address is loopback), `ssh://user@host[:port]` (the remote
 * runs `docker system dial-stdio`; keys from the ssh agent or `sshKey`).
 */
export const EngineSpecSchema = z.strictObject({
  /** How the engine is named in records, progress and `termgrade engines`; default from the host. */
  name: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, dot, dash and underscore only')
    .optional(),
  /** unix:///path (or a bare /path), tcp://host:port, ssh://user@host[:port]. */
  host: z.string().min(1),
  /** Sandboxes at once on this engine. */
  capacity: z.number().int().positive().default(4),
  labels: z.record(z.string(), z.string()).default({}),
  /** A folder with ca.pem, cert.pem and key.pem (Docker's DOCKER_CERT_PATH layout), for tcp://. */
  tlsDir: z.string().min(1).optional(),
  /** A private key file for ssh://; default the ssh agent (SSH_AUTH_SOCK). */
  sshKey: z.string().min(1).optional(),
});
export type EngineSpec = z.infer<typeof EngineSpecSchema>;
export type EngineSpecInput = z.input<typeof EngineSpecSchema>;

/**
 * `--engine HOST[,capacity=N][,name=X][,tls=DIR][,ssh-key=FILE][,label.K=V]`: the flag's form of
 * one engine, validated like a job file's entry.
 */
export function parseEngineFlag(text: string): EngineSpec {
  const [host, ...opts] = text.split(',');
  const input: Record<string, unknown> = { host: host?.trim() };
  const labels: Record<string, string> = {};
  for (const opt of opts) {
    const eq = opt.indexOf('=');
    const key = eq > 0 ? opt.slice(0, eq).trim() : '';
    const value = eq > 0 ? opt.slice(eq + 1).trim() : '';
    if (key === 'capacity') input.capacity = /^\d+$/.test(value) ? Number(value) : value;
    else if (key === 'name') input.name = value;
    else if (key === 'tls') input.tlsDir = path.resolve(value);
    else if (key === 'ssh-key') input.sshKey = path.resolve(value);
    else if (key.startsWith('label.') && key.length > 6) labels[key.slice(6)] = value;
    else
      throw new TermgradeError(
        'usage',
        `--engine ${text}: unknown option "${opt}" (known: capacity=N, name=X, tls=DIR, ssh-key=FILE, label.K=V)`,
      );
  }
  if (Object.keys(labels).length) input.labels = labels;
  const parsed = EngineSpecSchema.safeParse(input);
  if (!parsed.success)
    throw new TermgradeError(
      'usage',
      `--engine ${text}: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'host'}: ${i.message}`).join('; ')}`,
    );
  return parsed.data;
}

/** A readable default name: the socket's file name, or host[:port]. */
export function engineNameOf(spec: EngineSpec): string {
  if (spec.name) return spec.name;
  const h = spec.host;
  if (h.startsWith('/') || h.startsWith('unix://'))
    return path.basename(h.replace(/^unix:\/\//, '')).replace(/\.sock$/, '') || 'local';
  try {
    const u = new URL(h);
    return `${u.hostname}${u.port ? `:${u.port}` : ''}`.replace(/[^A-Za-z0-9._-]+/g, '-');
  } catch {
    // Not a URL (a bare host name): the host as written, made file-name safe.
    return h.replace(/[^A-Za-z0-9._-]+/g, '-');
  }
}

/** Engines from repeated `--engine` flags (undefined when none was given). */
export function enginesFromFlags(flags: string[] | undefined): EngineSpec[] | undefined {
  return flags?.length ? flags.map(parseEngineFlag) : undefined;
}
