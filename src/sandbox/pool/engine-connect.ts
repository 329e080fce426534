// Connecting to an engine an EngineSpec names: apart from the spec itself (engine-spec.ts, pure),
// so what only parses or stores specs (a job's spec, `--engine` flags) does not load the Docker
// and ssh clients.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import Docker from 'dockerode';
import { TermgradeError, errorMessage } from '../../util/errors.js';
import { isLoopback } from '../../util/net.js';
import { engineNameOf, type EngineSpec } from './engine-spec.js';
import { SshTunnel } from './ssh-tunnel.js';

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
