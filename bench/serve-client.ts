/** What the serve benches share: a client of a running server, a quantile and the process's memory. */
import type { RunningServer } from '../src/serve/server.js';
import type { ServeReply } from '../test/support/serve-call.js';

/** A JSON client of `server` (its bearer token sent); a status that is not 2xx throws, naming the call. */
export function client(server: RunningServer): (method: string, url: string, body?: unknown) => Promise<ServeReply> {
  const auth = { authorization: `Bearer ${server.token}` };
  return async (method, url, body) => {
    const res = await fetch(`${server.url}${url}`, {
      method,
      headers: body ? { ...auth, 'content-type': 'application/json' } : auth,
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : null) as ServeReply;
  };
}

/** The q-quantile of sorted values (nearest rank); NaN for none. */
export const quantile = (sorted: number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;

/** This process's memory after a collection (run node with --expose-gc for one to happen). */
export function memory(): { rss: number; heap: number; external: number } {
  global.gc?.();
  global.gc?.();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed, external: m.external };
}
