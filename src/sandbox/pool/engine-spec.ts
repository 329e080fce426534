import { readFileSync } from 'node:fs';
import path from 'node:path';
import Docker from 'dockerode';
import { z } from 'zod';
import { TermgradeError, errorMessage } from '../../util/errors.js';
import { isLoopback } from '../../util/net.js';
import { SshTunnel } from './ssh-tunnel.js';

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

function readCert(dir: string, file: string, engine: string): Buffer {
  try {
    return readFileSync(path.join(dir, file));
  } catch (err) {
    throw new TermgradeError(
      'bad_input',
      `engine ${engine}: cannot read ${path.join(dir, file)} (${errorMessage(err)})`,
    );
  }
}

/** A client for one engine, and what to close when done with it (an ssh tunnel). */
export interface EngineConnection {
  docker: Docker;
  close(): void;
}

/**
 * The dockerode client for one engine, over the transport its host names. ssh:// goes through a
 * local socket tunnelled over one long-lived ssh connection (see SshTunnel), not dockerode's own
 * ssh transport, which opens an ssh connection per request.
 */
export function connectEngine(spec: EngineSpec): EngineConnection {
  const h = spec.host;
  const plain = (docker: Docker): EngineConnection => ({ docker, close: () => {} });
  if (h.startsWith('/') || h.startsWith('unix://'))
    return plain(new Docker({ socketPath: h.replace(/^unix:\/\//, '') }));
  let url: URL;
  try {
    url = new URL(h);
  } catch {
    // Not a URL: said as bad input, naming the forms accepted.
    throw new TermgradeError('bad_input', `engine host "${h}" is not unix:///path, tcp://host:port or ssh://user@host`);
  }
  if (url.protocol === 'tcp:') {
    const port = url.port || (spec.tlsDir ? '2376' : '2375');
    if (spec.tlsDir) {
      const name = engineNameOf(spec);
      return plain(
        new Docker({
          host: url.hostname,
          port,
          protocol: 'https',
          ca: readCert(spec.tlsDir, 'ca.pem', name),
          cert: readCert(spec.tlsDir, 'cert.pem', name),
          key: readCert(spec.tlsDir, 'key.pem', name),
        }),
      );
    }
    // A plain-TCP engine is root on its machine for anyone who can reach it: only on loopback.
    if (!isLoopback(url.hostname))
      throw new TermgradeError(
        'bad_input',
        `engine ${h}: a remote engine over tcp needs TLS client certificates (tls=DIR with ca.pem, cert.pem, key.pem)`,
      );
    return plain(new Docker({ host: url.hostname, port, protocol: 'http' }));
  }
  if (url.protocol === 'ssh:') {
    let privateKey: Buffer | undefined;
    if (spec.sshKey) {
      try {
        privateKey = readFileSync(spec.sshKey);
      } catch (err) {
        throw new TermgradeError(
          'bad_input',
          `engine ${engineNameOf(spec)}: cannot read the ssh key ${spec.sshKey} (${errorMessage(err)})`,
        );
      }
    }
    const tunnel = new SshTunnel({
      host: url.hostname,
      port: url.port ? Number(url.port) : 22,
      username: decodeURIComponent(url.username) || process.env.USER || 'root',
      ...(privateKey ? { privateKey } : { agent: process.env.SSH_AUTH_SOCK }),
    });
    return { docker: new Docker({ socketPath: tunnel.socketPath }), close: () => tunnel.close() };
  }
  throw new TermgradeError('bad_input', `engine host "${h}": unknown scheme ${url.protocol} (unix://, tcp://, ssh://)`);
}

/** Engines from repeated `--engine` flags (undefined when none was given). */
export function enginesFromFlags(flags: string[] | undefined): EngineSpec[] | undefined {
  return flags?.length ? flags.map(parseEngineFlag) : undefined;
}
