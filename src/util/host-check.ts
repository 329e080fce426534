import { hostname, networkInterfaces } from 'node:os';
import { isLoopback } from './net.js';

/** A bind on every interface: the names it answers to are the machine's own. */
function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]' || host === '';
}

function bare(name: string): string {
  return name.toLowerCase().replace(/^\[(.*)\]$/, '$1');
}

/** The host name of a Host header or an Origin (`name`, `name:port`, `[v6]:port`), or null if it is not one. */
function hostOf(value: string, scheme = 'http://'): { name: string; port: string } | null {
  try {
    const u = new URL(value.includes('://') ? value : `${scheme}${value}`);
    const port = u.port || (u.protocol === 'https:' ? '443' : '80');
    return { name: bare(u.hostname), port };
  } catch {
    // Not a URL's host: the one failure new URL() has.
    return null;
  }
}

/**
 * Who may talk to a server bound to `host`, against DNS rebinding and cross-site requests: the
 * Host header must name the bound address (loopback names for a loopback bind, the machine's
 * addresses and host name for a bind on every interface) or a name the operator allowed
 * (`--allowed-host`); an Origin, when a browser sends one, must be such a name on the server's own
 * port (any port for an operator's name, which may sit behind a proxy). `refusal` says why not,
 * or null.
 */
export class HostCheck {
  private readonly names = new Set<string>();
  private readonly operatorNames: Set<string>;
  /** The port the server listens on (set once listening, for port 0). */
  port = 0;

  constructor(bindHost: string, allowedHosts: string[] = []) {
    this.operatorNames = new Set(allowedHosts.map((h) => hostOf(h)?.name ?? bare(h)));
    const bind = bare(bindHost);
    for (const n of [bind, ...this.operatorNames]) this.names.add(n);
    if (isLoopback(bindHost) || isWildcard(bindHost))
      for (const n of ['localhost', '127.0.0.1', '::1']) this.names.add(n);
    if (isWildcard(bindHost)) {
      this.names.add(hostname().toLowerCase());
      for (const list of Object.values(networkInterfaces()))
        for (const a of list ?? []) this.names.add(bare(a.address));
    }
  }

  refusal(hostHeader: string | undefined, origin: string | undefined): string | null {
    const host = hostOf(hostHeader ?? '');
    if (!host || !this.names.has(host.name))
      return `Host "${hostHeader ?? ''}" is not an address this server answers to (start it with --allowed-host NAME to add one)`;
    if (origin === undefined) return null;
    const from = origin === 'null' ? null : hostOf(origin);
    const ok =
      from !== null &&
      (this.operatorNames.has(from.name) || (this.names.has(from.name) && from.port === String(this.port)));
    return ok ? null : `Origin "${origin}" is not this server's: requests from other sites are refused`;
  }
}
