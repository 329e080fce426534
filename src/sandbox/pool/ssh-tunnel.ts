import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, type ConnectConfig } from 'ssh2';
import { causeOf, log } from '../../util/log.js';

/**
 * A local socket that reaches a remote Docker engine over one long-lived ssh connection: each
 * connection to the socket is one ssh channel running `docker system dial-stdio` on the remote.
 * dockerode's own ssh transport makes a new ssh connection (key exchange, authentication) for
 * every request, ~230 ms each measured here; a channel on an open connection costs a round trip.
 * The ssh connection is made when first needed and again after it drops (an engine host that
 * went away and came back).
 */
export class SshTunnel {
  readonly socketPath: string;
  private readonly dir: string;
  private readonly server: Server;
  private client: Promise<Client> | null = null;

  constructor(private readonly config: ConnectConfig) {
    this.dir = mkdtempSync(path.join(tmpdir(), 'termgrade-ssh-'));
    this.socketPath = path.join(this.dir, 'docker.sock');
    this.server = createServer((local) => void this.forward(local));
    this.server.listen(this.socketPath);
    this.server.unref();
  }

  private connect(): Promise<Client> {
    this.client ??= new Promise<Client>((resolve, reject) => {
      const c = new Client();
      const drop = (): void => {
        this.client = null;
      };
      c.once('ready', () => resolve(c));
      c.once('error', (err) => {
        drop();
        reject(err);
      });
      c.once('close', drop);
      c.connect({ readyTimeout: 10_000, keepaliveInterval: 5_000, ...this.config });
    });
    return this.client;
  }

  private async forward(local: Socket): Promise<void> {
    local.on('error', () => local.destroy());
    try {
      const client = await this.connect();
      client.exec('docker system dial-stdio', (err, remote) => {
        if (err) {
          local.destroy();
          return;
        }
        local.pipe(remote).pipe(local);
        remote.on('close', () => local.destroy());
        remote.on('error', () => local.destroy());
        local.on('close', () => remote.close());
      });
    } catch (err) {
      // The engine is unreachable: the request fails and the pool drains it.
      log.debug('could not reach an engine over ssh', { cause: causeOf(err) });
      local.destroy();
    }
  }

  close(): void {
    this.server.close();
    void this.client?.then(
      (c) => c.end(),
      () => undefined, // it never connected: nothing to end
    );
    rmSync(this.dir, { recursive: true, force: true });
  }
}
